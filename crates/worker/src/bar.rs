//! The pool's bar: the best score confirmed on any GPU, and the screens of new bests
//! whose full gate is compiling. A candidate is re-timed only if it beats the first;
//! its full gate compiles at once only if no screen as fast already holds a claim.

use std::sync::Mutex;

/// Shared by the runners of a pool: a new best on one GPU is at once the bar for all,
/// so none re-times a candidate slower than it, and a screen as fast as one already
/// compiling its full gate (on any GPU) waits for that one's outcome before it compiles
/// its own (a four-H100 run spent 18 full-gate compiles of 28 on new bests that were no
/// longer new bests by their turn).
#[derive(Debug, Default)]
pub(crate) struct Bar(Mutex<Marks>);

#[derive(Debug, Default)]
struct Marks {
    confirmed: Option<f64>,
    /// The screens holding a claim: their full gate compiling or their confirmation
    /// waiting its turn.
    claimed: Vec<f64>,
}

impl Bar {
    fn marks(&self) -> std::sync::MutexGuard<'_, Marks> {
        self.0.lock().expect("no thread panics holding it")
    }

    /// The best score confirmed so far, if any.
    pub(crate) fn get(&self) -> Option<f64> {
        self.marks().confirmed
    }

    /// A confirmation of `us`: the bar for every GPU when it is the best.
    pub(crate) fn lower(&self, us: f64) {
        let mut marks = self.marks();
        if marks.confirmed.is_none_or(|b| us < b) {
            marks.confirmed = Some(us);
        }
    }

    /// Whether a screen of `us` may compile its full gate now: not while a screen as
    /// fast holds a claim. A claim granted is held until [`Bar::release`].
    pub(crate) fn claim(&self, us: f64) -> bool {
        let mut marks = self.marks();
        if marks.claimed.iter().any(|&c| c <= us) {
            return false;
        }
        marks.claimed.push(us);
        true
    }

    /// Gives up the claim of a screen of `us` once its confirmation is settled (after
    /// [`Bar::lower`], so that the screens waiting on it see the new bar).
    pub(crate) fn release(&self, us: f64) {
        let mut marks = self.marks();
        if let Some(i) = marks.claimed.iter().position(|&c| c == us) {
            marks.claimed.swap_remove(i);
        }
    }
}
