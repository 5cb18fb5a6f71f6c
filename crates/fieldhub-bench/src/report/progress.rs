//! The report's progress on stderr: a bar of the sections done, the
//! current section and the benchmark's own last word.

use crate::Progress;

/// Width of the bar in characters.
const BAR: usize = 16;

/// Sections started so far, and where to say so.
pub struct Stages<'a> {
    progress: Progress<'a>,
    total: usize,
    started: usize,
    current: &'static str,
}

impl<'a> Stages<'a> {
    pub fn new(progress: Progress<'a>, total: usize) -> Self {
        Self { progress, total, started: 0, current: "" }
    }

    /// A section (or, before the first, a preparation) starts.
    pub fn begin(&mut self, name: &'static str) {
        if !self.current.is_empty() {
            self.started += 1;
        }
        self.current = name;
        self.report("");
    }

    /// All sections are done.
    pub fn done(&mut self) {
        self.started = self.total;
        self.current = "writing";
        self.report("");
    }

    /// `detail` (a benchmark's progress line) under the current section.
    pub fn report(&mut self, detail: &str) {
        let filled = (self.started * BAR).div_ceil(self.total.max(1)).min(BAR);
        let line = format!(
            "[{}{}] {}/{} {}: {detail}",
            "#".repeat(filled),
            "-".repeat(BAR - filled),
            self.started.min(self.total),
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
    fn the_bar_fills_as_sections_start() {
        let mut lines = Vec::new();
        let mut sink = |line: &str| lines.push(line.to_owned());
        let mut stages = Stages::new(&mut sink, 4);
        stages.begin("preparing");
        stages.begin("one");
        stages.report("1000/2000");
        stages.done();
        assert_eq!(lines[0], "[----------------] 0/4 preparing: ");
        assert_eq!(lines[2], "[####------------] 1/4 one: 1000/2000");
        assert_eq!(lines[3], "[################] 4/4 writing: ");
    }
}
