//! The backward pass's side of the gates: its inputs and its CPU reference.
//!
//! A backward kernel is judged as a function of its inputs — Q, K, V, the forward's
//! O and lse, and the incoming gradient dO — not as the derivative of whatever forward
//! ran before it: O is handed over rounded to the element type and lse in fp32, and
//! the reference takes both as given (dpsum = rowsum(dO ∘ O) with that rounded O, P =
//! exp(S − lse) with that lse), as FlashAttention's backward uses them.
//!
//! [`inputs`] draws a launch's tensors (Q, K, V exactly as the forward's gates do, dO
//! on a stream of its own, O and lse from [`forward`]); [`reference`] is candle's CPU
//! gradients, for every row or for the rows [`sample`] picks on large problems. The
//! mask is the forward's second ABI (kernels/mask.cuh): causal with a diagonal,
//! windows, grouped K/V heads, and rows that see no key (lse = +inf, so P = 0 there
//! and the row's dQ is zero; a key no query sees gets dK = dV = 0).

pub mod evaluate;
pub mod fast;
pub mod forward;
pub mod green;
pub mod inputs;
pub mod reference;
pub mod sample;

#[cfg(all(test, feature = "gpu"))]
mod gpu_tests;
#[cfg(test)]
mod green_tests;
#[cfg(test)]
mod tests;

pub use forward::{forward, Forward};
pub use inputs::BackwardInputs;
pub use reference::{
    backward_rows, gradients, sampled_gradients, Gradients, HeadRows, SampledGradients,
};
pub use sample::{sample_key_rows, sample_query_rows};
