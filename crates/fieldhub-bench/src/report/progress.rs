//! The report's progress on stderr: a bar of the sections done, the
//! current section and the benchmark's own last word.

use crate::Progress;

/// Width of the bar in characters.
const BAR: usize = 16;

/// Sections begun so far, and where to say so.
pub struct Stages<'a> {
    progress: Progress<'a>,
    total: usize,
    begun: usize,
    current: &'static str,
}

impl<'a> Stages<'a> {
    pub fn new(progress: Progress<'a>, total: usize) -> Self {
        Self { progress, total, begun: 0, current: "preparing" }
    }

    /// The next section starts: the one before is done.
    pub fn begin(&mut self, name: &'static str) {
        self.begun += 1;
        self.current = name;
        self.report("");
    }

    /// All sections are done.
    pub fn done(&mut self) {
        self.begun = self.total + 1;
        self.current = "writing";
        self.report("");
    }

    /// `detail` (a benchmark's progress line) under the current section.
    pub fn report(&mut self, detail: &str) {
        let done = self.begun.saturating_sub(1).min(self.total);
        let filled = (done * BAR).div_ceil(self.total.max(1)).min(BAR);
        let line = format!(
            "[{}{}] {done}/{} {}: {detail}",
            "#".repeat(filled),
            "-".repeat(BAR - filled),
            self.total,
            self.current
        );
        (self.progress)(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_as_sections_are_done() {
        let mut lines = Vec::new();
        let mut sink = |line: &str| lines.push(line.to_owned());
        let mut stages = Stages::new(&mut sink, 4);
        stages.report("watching the machine");
        stages.begin("one");
        stages.begin("two");
        stages.report("1000/2000");
        stages.done();
        assert_eq!(lines[0], "[----------------] 0/4 preparing: watching the machine");
        assert_eq!(lines[1], "[----------------] 0/4 one: ");
        assert_eq!(lines[3], "[####------------] 1/4 two: 1000/2000");
        assert_eq!(lines[4], "[################] 4/4 writing: ");
    }
}
