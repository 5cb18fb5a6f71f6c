//! Inputs derived from a corpus, the way a mutating fuzzer derives them:
//! bits flipped, bytes set to edge values, ranges cut, repeated or spliced
//! in from another input. Seeded, so a test that finds something finds it
//! again on every run and every machine.

/// A small, fast, seeded generator (xorshift64*): reproducible, not secure.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `bound` (which must not be 0).
    pub fn below(&mut self, bound: usize) -> usize {
        (self.next_u64() % bound as u64) as usize
    }
}

/// Values that sit on the edges decoders check: zero, signs, all ones.
const EDGES: [u8; 8] = [0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF, b'0', b'#'];

/// Up to `MAX_LEN` bytes: mutated inputs stay near the corpus's sizes.
const MAX_LEN: usize = 64 * 1024;

/// One input derived from `corpus` (which must not be empty): a corpus
/// entry with one to four mutations.
pub fn mutate(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut input = corpus[rng.below(corpus.len())].clone();
    for _ in 0..1 + rng.below(4) {
        mutate_once(rng, &mut input, corpus);
    }
    input.truncate(MAX_LEN);
    input
}

fn mutate_once(rng: &mut Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    if input.is_empty() {
        input.push(EDGES[rng.below(EDGES.len())]);
        return;
    }
    let at = rng.below(input.len());
    match rng.below(8) {
        0 => input[at] ^= 1 << rng.below(8),
        1 => input[at] = EDGES[rng.below(EDGES.len())],
        2 => input[at] = rng.next_u64() as u8,
        3 => {
            let end = (at + 1 + rng.below(16)).min(input.len());
            input.drain(at..end);
        }
        4 => {
            let end = (at + 1 + rng.below(16)).min(input.len());
            let copy = input[at..end].to_vec();
            input.splice(at..at, copy);
        }
        5 => {
            let bytes: Vec<u8> = (0..1 + rng.below(8)).map(|_| rng.next_u64() as u8).collect();
            input.splice(at..at, bytes);
        }
        6 => {
            // A little-endian word set to an edge of its range: lengths,
            // counts and indices are read as words.
            let word = [0u32, 1, 0x7F, 0x80, 0xFFFF, 0x7FFF_FFFF, u32::MAX][rng.below(7)].to_le_bytes();
            let end = (at + 4).min(input.len());
            input.splice(at..end, word);
        }
        _ => {
            let other = &corpus[rng.below(corpus.len())];
            if !other.is_empty() {
                let from = rng.below(other.len());
                let tail = other[from..].to_vec();
                input.truncate(at);
                input.extend_from_slice(&tail);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_derives_the_same_inputs() {
        let corpus = vec![b"123#DEADBEEF".to_vec(), vec![0; 40]];
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..100).map(|_| mutate(&mut rng, &corpus)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        assert!(run(7).iter().any(|input| !corpus.contains(input)), "nothing was mutated");
    }
}
