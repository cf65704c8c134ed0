//! Batches a pipelined search announced before asking for them, compiling meanwhile.

use crate::compiler::{remove_files, BatchCompiler, Prepared};
use evo_genome::{Genome, GenomeId};
use rayon::prelude::*;
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;

/// Announced batches kept at most: the one about to be asked for and the one after it.
pub(crate) const AHEAD: usize = 2;

/// A batch compiling ahead of its turn: its genomes and their compiled candidates as
/// they come (index in the batch, candidate).
pub struct Ahead {
    pub(crate) ids: Vec<GenomeId>,
    pub(crate) compiled: Receiver<(usize, Prepared)>,
    pub(crate) thread: std::thread::JoinHandle<()>,
}

impl Ahead {
    /// Starts compiling `batch` on the compile threads, each candidate sent as soon as
    /// it is compiled.
    pub(crate) fn start(compiler: Arc<BatchCompiler>, batch: &[Genome]) -> Ahead {
        let (tx, compiled) = mpsc::channel();
        let genomes = batch.to_vec();
        let thread = std::thread::spawn(move || {
            compiler.install(|| {
                genomes
                    .par_iter()
                    .enumerate()
                    .for_each_with(tx, |tx, (i, genome)| {
                        // The receiver lives until this thread is joined.
                        let _ = tx.send((i, compiler.compile_one(genome)));
                    })
            });
        });
        Ahead {
            ids: batch.iter().map(|g| g.id()).collect(),
            compiled,
            thread,
        }
    }

    /// A batch that will not be asked for: waits for its compiles, removes their files.
    pub(crate) fn discard(self) {
        let Ahead {
            compiled, thread, ..
        } = self;
        let _ = thread.join();
        for (_, p) in compiled.try_iter() {
            if let Prepared::Run(request) = p {
                remove_files(&request.variants);
            }
        }
    }
}
