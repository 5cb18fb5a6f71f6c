//! `fieldhub top`'s full-screen view, driven as a user drives it: inside a
//! detached tmux session of a fixed size (send-keys types, capture-pane
//! reads the screen), against a real hub and a sender of numbered frames.
//! Each test also proves the terminal comes back as it was: the shell
//! runs again, the alternate screen is gone and `stty` finds cooked mode.

use std::path::PathBuf;
use std::process::{Command, Output};

use fieldhub_proto::Frame;
use fieldhub_testkit::{deadline, poll, unique, HubProcess};

use crate::FIELDHUB;

/// One private tmux server (its own socket, no configuration file) with one
/// session running `sh` in a pane of 120×30; killed with its files when dropped.
struct Tmux {
    dir: PathBuf,
}

impl Tmux {
    fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("fieldhub-top-tui-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(&dir).unwrap();
        let tmux = Self { dir };
        let out = tmux.run(&["new-session", "-d", "-x", "120", "-y", "30", "sh"]);
        assert!(out.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&out.stderr));
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(self.dir.join("socket"))
            .args(["-f", "/dev/null"])
            .args(args)
            // The pane's shell prints a plain prompt, whoever runs the test.
            .env("PS1", "$ ")
            .env("ENV", "/dev/null")
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run tmux ({e}): it drives the terminal view here; install it with `make deps` (mk/deps.mk)"
                )
            })
    }

    /// Type `keys` (tmux send-keys' names: `Enter`, `Escape`, `C-c`, or text).
    fn keys(&self, keys: &[&str]) {
        let out = self.run(&[&["send-keys", "-t", "0"][..], keys].concat());
        assert!(out.status.success(), "tmux send-keys: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A line of text typed and entered at the shell's prompt.
    fn type_line(&self, line: &str) {
        self.keys(&["-l", line]);
        self.keys(&["Enter"]);
    }

    fn screen(&self) -> String {
        String::from_utf8(self.run(&["capture-pane", "-p", "-t", "0"]).stdout).unwrap()
    }

    /// A tmux format of the pane (`#{alternate_on}`, `#{pane_current_command}`).
    fn pane(&self, format: &str) -> String {
        String::from_utf8(self.run(&["display-message", "-p", "-t", "0", format]).stdout).unwrap().trim().to_owned()
    }

    /// The screen once `ready` holds for it.
    fn wait_for_screen(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        poll(deadline(), || Some(self.screen()).filter(|s| ready(s)))
            .unwrap_or_else(|| panic!("waited in vain for {what}; the screen:\n{}", self.screen()))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The identifiers table's rows: (ID, COUNT), top to bottom.
fn id_rows(screen: &str) -> Vec<(String, u64)> {
    screen
        .lines()
        .filter(|l| !l.contains("bit/s"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() >= 6 && w[0] == "can0")
        .filter_map(|w| Some((w[1].to_owned(), w[2].parse().ok()?)))
        .collect()
}

/// Start `fieldhub top` on `hub`'s can0 in the pane; it has drawn once it shows its title.
fn start_top(tmux: &Tmux, hub: &HubProcess, extra: &str) {
    let command = format!("{} top --hub {} -i 200 {extra} can0; echo top-ended-$?", FIELDHUB.path().display(), hub.url);
    tmux.type_line(&command);
    tmux.wait_for_screen("the view's title", |s| s.contains("fieldhub top  hub "));
    assert_eq!(tmux.pane("#{alternate_on}"), "1", "the view is drawn on the alternate screen");
}

/// After top ended: its status was 0, the shell is back on the main screen, in cooked mode.
fn check_terminal_restored(tmux: &Tmux) {
    tmux.wait_for_screen("top's end", |s| s.contains("top-ended-0"));
    assert_eq!(tmux.pane("#{alternate_on}"), "0", "the main screen is back");
    let modes = tmux.dir.join("stty");
    tmux.type_line(&format!("stty -a > {}", modes.display()));
    let modes = poll(deadline(), || std::fs::read_to_string(&modes).ok().filter(|m| m.contains("icanon")))
        .expect("stty -a wrote its modes");
    let words: Vec<&str> = modes.split(|c: char| c.is_whitespace() || c == ';').collect();
    for mode in ["icanon", "echo", "isig", "icrnl", "opost"] {
        assert!(words.contains(&mode), "{mode} is on again (no raw mode left): {modes}");
    }
}

#[test]
fn top_on_a_terminal_shows_each_identifier_sorts_by_a_key_and_q_restores_the_terminal() {
    let hub = FIELDHUB.start();
    let tmux = Tmux::start();
    start_top(&tmux, &hub, "--sort id");
    let screen = tmux.screen();
    assert!(screen.contains("[i] id") && screen.contains("[c] count") && screen.contains("[q]"), "{screen}");

    // Numbered frames of three identifiers, sent once top listens.
    let client = hub.client("sender");
    let port = client.open_port("can0").unwrap();
    for (id, count) in [(0x100, 3u8), (0x200, 12), (0x300, 6)] {
        for n in 0..count {
            client.send(&port, &Frame::can(id, false, &[n, 0xAA]).unwrap()).unwrap();
        }
    }
    client.flush().unwrap();

    let counted = [("100".to_owned(), 3), ("200".to_owned(), 12), ("300".to_owned(), 6)];
    let screen = tmux.wait_for_screen("every frame counted, by id", |s| id_rows(s) == counted);
    assert!(screen.contains("can0  can 500000 bit/s  load "), "the channel's load line: {screen}");
    assert!(screen.contains(" 21 frames  error frames 0  dropped 0  TEC/REC 0/0"), "{screen}");
    // The last frame's data, numbered.
    assert!(screen.lines().any(|l| l.starts_with("can0") && l.contains(" 200 ") && l.contains("0B AA")), "{screen}");

    tmux.keys(&["c"]);
    tmux.wait_for_screen("the rows sorted by count", |s| {
        id_rows(s) == [("200".to_owned(), 12), ("300".to_owned(), 6), ("100".to_owned(), 3)]
    });

    // A smaller terminal: the view is drawn anew to its size, the keys on its last line.
    let out = tmux.run(&["resize-window", "-t", "0", "-x", "90", "-y", "16"]);
    assert!(out.status.success(), "tmux resize-window: {}", String::from_utf8_lossy(&out.stderr));
    tmux.wait_for_screen("the view redrawn in 90×16", |s| {
        let lines: Vec<&str> = s.lines().collect();
        lines.len() == 16 && lines[15].starts_with("sort: ") && lines[15].contains("[c] count")
    });

    tmux.keys(&["q"]);
    check_terminal_restored(&tmux);
}

#[test]
fn top_on_a_terminal_restores_it_when_terminated() {
    let hub = FIELDHUB.start();
    let tmux = Tmux::start();
    start_top(&tmux, &hub, "");
    // top is the pane's shell's one child.
    let shell = tmux.pane("#{pane_pid}");
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
    let top: i32 =
        children.split_whitespace().next().and_then(|pid| pid.parse().ok()).expect("top runs under the shell");
    // SAFETY: kill(2) on a pid is sound for any value; this one is top's.
    assert_eq!(unsafe { libc::kill(top, libc::SIGTERM) }, 0, "SIGTERM to top ({top})");
    check_terminal_restored(&tmux);
}
