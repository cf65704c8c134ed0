//! The boundary between the search and whatever measures a genome.
//!
//! The search loop hands one generation's batch at a time to an [`Evaluator`]: the
//! GPU worker (which compiles the batch in parallel and runs the gates serially),
//! the replay of a recorded landscape ([`crate::landscape::LandscapeEvaluator`]),
//! or a test fake. The loop never knows which. A steady-state search instead submits
//! candidates one at a time and takes each answer as it comes
//! ([`Evaluator::submit`], [`Evaluator::next_answer`]).

use evo_genome::Genome;
use evo_record::Evaluation;
use thiserror::Error;

/// A failure of the evaluator itself (not of a candidate: a candidate's failure is an
/// [`Evaluation`] with a failed status). The search stops and keeps what it has.
#[derive(Debug, Error)]
#[error("{0}")]
pub struct EvaluatorError(pub String);

impl EvaluatorError {
    pub fn new(message: impl Into<String>) -> EvaluatorError {
        EvaluatorError(message.into())
    }
}

/// Something that measures genomes.
pub trait Evaluator {
    /// The device name as the driver reports it; part of every cache key.
    fn device(&self) -> String;
    /// A hash of the kernel template (so a changed template never reuses old timings).
    fn template_hash(&self) -> String;
    /// The compiler that built the kernels, e.g. `nvrtc 13.0`.
    fn toolchain(&self) -> String;
    /// One evaluation per genome, in the order given.
    fn evaluate(&mut self, batch: &[Genome]) -> Result<Vec<Evaluation>, EvaluatorError>;

    /// As [`Evaluator::evaluate`], handing each evaluation to `done` as soon as it
    /// exists, so the caller can record it before the rest of the batch has run (a
    /// search killed mid-batch then loses nothing already measured). The default
    /// reports them when the whole batch is back; slow evaluators override it.
    fn evaluate_each(
        &mut self,
        batch: &[Genome],
        done: &mut dyn FnMut(&Evaluation),
    ) -> Result<Vec<Evaluation>, EvaluatorError> {
        let evaluated = self.evaluate(batch)?;
        evaluated.iter().for_each(&mut *done);
        Ok(evaluated)
    }
    /// One line saying what this evaluator is, for the first line of a run's output.
    fn describe(&self) -> String;

    /// The batch the search will ask for next, known before this one is evaluated (a
    /// pipelined search): an evaluator may start preparing it (compiling) while it
    /// measures the current one. The next `evaluate_each` call must still work for any
    /// batch; the default prepares nothing ahead.
    fn prefetch(&mut self, _next: &[Genome]) {}

    /// Lines saying where the devices' time went during the run (one per GPU), for the
    /// end of a run's output; none for evaluators without a device.
    fn utilization(&self) -> Vec<String> {
        Vec::new()
    }

    /// How many candidates a steady-state search should keep submitted and unanswered
    /// so that this evaluator never waits for the next one; 1 for one that answers at
    /// once.
    fn in_flight(&self) -> usize {
        1
    }

    /// Steady-state: starts on one genome, whose evaluation a later
    /// [`Evaluator::next_answer`] returns. The default starts nothing before it is
    /// asked.
    fn submit(&mut self, _genome: &Genome) -> Result<(), EvaluatorError> {
        Ok(())
    }

    /// Steady-state: the evaluation of one of the genomes submitted and not yet answered
    /// (`waiting`, oldest first), the first to be ready. The default evaluates the oldest
    /// alone, so its answers come in the order submitted.
    fn next_answer(&mut self, waiting: &[Genome]) -> Result<Evaluation, EvaluatorError> {
        let oldest = waiting
            .first()
            .ok_or_else(|| EvaluatorError::new("asked for an answer with nothing submitted"))?;
        self.evaluate(std::slice::from_ref(oldest))?
            .pop()
            .ok_or_else(|| EvaluatorError::new("answered a genome with no evaluation"))
    }
}
