//! Issue 39's rough edges of the command: a closed pipe, another program on
//! the hub's address, no hub at all, out-of-range values, a can-utils name
//! typed out of habit. Each is how a newcomer met it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};

use crate::FIELDHUB;
use fieldhub_testkit::federation::free_port;

/// Run `command` with its stdout a pipe whose reader is gone before it
/// starts, as in `command | true` when `true` is quicker. (Closing the read
/// end after the spawn raced the command: a quick one wrote its few lines
/// into the pipe first and exited 0.)
fn into_closed_pipe(mut command: Command) -> Output {
    let mut fds = [0; 2];
    // Close-on-exec: a command another test spawns meanwhile must not
    // inherit the read end and keep the pipe open.
    // SAFETY: pipe2(2) writes two new descriptors into the array it is given.
    let made = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(made, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are new and owned by nothing else.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(reader);
    let child = command.stdout(Stdio::from(writer)).stderr(Stdio::piped()).spawn().expect("start fieldhub");
    child.wait_with_output().expect("wait for fieldhub")
}

/// Ended quietly with the status a shell shows for a writer a closed pipe
/// ended: 141, as `yes | head` gives.
fn assert_ended_by_closed_pipe(what: &str, out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{what}: {:?} ({:?}): {stderr}", out.status, out.status.signal());
    assert!(stderr.is_empty(), "{what} into a closed pipe says nothing: {stderr}");
}

fn fieldhub(args: &[&str]) -> Command {
    let mut command = FIELDHUB.command();
    command.args(args);
    command
}

#[test]
fn a_closed_pipe_ends_each_tool_quietly_with_the_shells_status() {
    let hub = FIELDHUB.start();
    for args in [
        &["frame-bits", "123#DEADBEEF"][..],
        &["frame-bits", "--json", "123#DEADBEEF"],
        &["hub", "--print-default-config"],
        &["hub", "--check-config"],
        &["ctl", "--hub", &hub.url, "ports"],
        &["stats", "--hub", &hub.url],
        &["stats", "--json", "--hub", &hub.url],
        &["gen", "--hub", &hub.url, "-v", "-n", "3", "-g", "0", "can0"],
    ] {
        assert_ended_by_closed_pipe(&args.join(" "), &into_closed_pipe(fieldhub(args)));
    }
}

#[test]
fn dump_into_a_closed_pipe_ends_at_its_next_frame_quietly() {
    let hub = FIELDHUB.start();
    let mut dump = fieldhub(&["dump", "--hub", &hub.url, "can0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dump");
    drop(dump.stdout.take());
    hub.wait_for_log("port opened");
    let sender = hub.client("sender");
    let port = sender.open_port("can0").unwrap();
    sender.send(&port, &fieldhub_proto::text::parse_cansend("123#01").unwrap()).unwrap();
    sender.flush().unwrap();
    let out = dump.wait_with_output().unwrap();
    assert_ended_by_closed_pipe("dump can0", &out);
}

/// A web server on the hub's port: it answers every request, a HELLO too,
/// with an HTML 404.
fn web_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = [0u8; 512];
            let _ = stream.read(&mut request);
            let page = "<html>not found</html>";
            let _ = write!(
                stream,
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    address
}

/// A server that takes connections and never says a word.
fn silent_server() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    (listener, address)
}

#[test]
fn another_program_on_the_hubs_port_is_named_as_not_a_hub() {
    let web = web_server();
    let (_silent, quiet) = silent_server();
    let url = format!("tcp://{web}");
    let runs = [
        (fieldhub(&["ctl", "--hub", &url, "ports"]), web.clone()),
        (fieldhub(&["dump", "--hub", &url, "can0"]), url.clone()),
        (fieldhub(&["send", "--hub", &url, "can0", "123#01"]), url.clone()),
        (fieldhub(&["send", "--hub", &format!("tcp://{quiet}"), "--timeout", "0.3", "can0", "123#01"]), quiet),
    ];
    for (mut command, address) in runs {
        let out = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("something that is not a fieldhub hub answers at"), "{stderr}");
        assert!(stderr.contains(&address), "names the address {address}: {stderr}");
    }
}

#[test]
fn ctl_without_a_hub_asks_whether_one_runs_there_as_the_data_tools_do() {
    let url = format!("tcp://127.0.0.1:{}", free_port());
    for args in [&["ctl", "--hub", &url, "ports"][..], &["stats", "--hub", &url]] {
        let out = fieldhub(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("is `fieldhub hub` running there?"), "{}: {stderr}", args.join(" "));
    }
}

#[test]
fn gen_values_out_of_range_say_the_range() {
    for (args, range) in [
        (&["-I", "800"][..], "a hex identifier 0 to 7FF (to 1FFFFFFF with -e)"),
        (&["-e", "-I", "20000000"], "a hex identifier 0 to 1FFFFFFF"),
        (&["-L", "9"], "a length 0 to 8 (to 64 with -f, a DLC to 15 with -8)"),
        (&["-8", "-L", "16"], "a DLC 0 to 15"),
        (&["-f", "-L", "65"], "a length 0 to 64"),
    ] {
        // Checked before connecting: no hub is needed to hear it.
        let out = fieldhub(&["gen", "--hub", "tcp://127.0.0.1:1"]).args(args).arg("can0").output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(&format!("expected r (random), i (incrementing) or {range}")), "{stderr}");
    }
}

#[test]
fn ctl_bridge_help_describes_from_and_to() {
    let out = fieldhub(&["ctl", "bridge", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let described = |name: &str| help.lines().any(|l| l.trim_start().starts_with(name) && l.trim().len() > name.len());
    assert!(described("<FROM>") && described("<TO>"), "{help}");
}

#[test]
fn a_can_utils_name_gets_the_fieldhub_tool_it_means() {
    for (theirs, ours) in [("candump", "dump"), ("cansend", "send"), ("cangen", "gen"), ("canplayer", "replay")] {
        let out = fieldhub(&[theirs, "can0"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&format!("did you mean 'fieldhub {ours}'?")), "{stderr}");
    }
}

/// A hub on a fixed loopback port, so a restarted one is at the same address.
fn hub_at(port: u16) -> fieldhub_testkit::HubProcess {
    FIELDHUB.start_with(None, &["--listen", &format!("127.0.0.1:{port}")])
}

#[test]
fn dump_and_gen_exit_when_the_hub_goes_away_naming_reconnect() {
    let port = free_port();
    let hub = hub_at(port);
    let url = format!("tcp://127.0.0.1:{port}");
    let dump = fieldhub(&["dump", "--hub", &url, "can0"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let gen = fieldhub(&["gen", "--hub", &url, "-g", "5", "can1"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn();
    hub.wait_for_log_times("port opened", 2);
    drop(hub);
    for (tool, child) in [("dump", dump), ("gen", gen.unwrap())] {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(&format!("`fieldhub {tool} --reconnect` waits for the hub to come back")), "{stderr}");
    }
}

#[test]
fn dump_and_gen_with_reconnect_go_on_across_a_hub_restart() {
    let port = free_port();
    let url = format!("tcp://127.0.0.1:{port}");
    let hub = hub_at(port);
    let mut dump = fieldhub(&["dump", "--reconnect", "--hub", &url, "-L", "can0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut gen = fieldhub(&["gen", "--reconnect", "--hub", &url, "-g", "5", "-I", "123", "can0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(dump.stdout.take().unwrap()).lines();
    let mut next_line = move || lines.next().expect("dump goes on").expect("a line");
    assert!(next_line().contains(" can0 123#"), "gen's frames reach dump before the restart");
    drop(hub);
    let hub = hub_at(port);
    hub.wait_for_log_times("port opened", 2);
    let watcher = hub.client("watcher");
    let watching = watcher.open_port("can0").unwrap();
    assert_eq!(fieldhub_testkit::recv_n(&watcher, 1)[0].frame.id(), 0x123, "gen sends on the new hub");
    watcher.send(&watching, &fieldhub_proto::text::parse_cansend("7AB#CAFE").unwrap()).unwrap();
    while !next_line().ends_with(" can0 7AB#CAFE") {}
    for child in [&mut gen, &mut dump] {
        assert!(child.try_wait().unwrap().is_none(), "still running after the restart");
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
