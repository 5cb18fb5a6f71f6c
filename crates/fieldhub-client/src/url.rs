//! Hub URLs: [`SCHEMES`], the one table of the forms a hub URL takes
//! (`tcp://HOST:PORT`, `unix:PATH`, `shm://NAME`, …), and [`HubUrl::parse`],
//! which goes by it. The table also gives the list of forms every message
//! about a URL of no known form shows ([`FORMS`]), and the C library's
//! `FH_ERR_INVALID_URL` text ([`forms_text`]), so a new form is added in
//! one place.

use std::path::{Path, PathBuf};

use fieldhub_proto::limits::DEFAULT_TCP_PORT;

/// One form of hub URL: a row of [`SCHEMES`].
#[derive(Debug)]
pub struct Scheme {
    /// What a URL of this form starts with.
    pub prefix: &'static str,
    /// What the URL reaches.
    pub what: &'static str,
    /// The form as messages show it, as in `tcp://HOST:PORT`.
    pub form: &'static str,
    /// Turns what follows the prefix into a [`HubUrl`], or says what is wrong.
    parse: fn(&Scheme, &str) -> Result<HubUrl, String>,
}

/// Every form of hub URL, in the order messages list them. No prefix is the
/// start of another, so a URL matches one row at most.
pub const SCHEMES: &[Scheme] = &[
    Scheme { prefix: "tcp://", what: "a hub's TCP port", form: "tcp://HOST:PORT", parse: parse_tcp },
    Scheme { prefix: "tls://", what: "a hub's TCP port that speaks TLS", form: "tls://HOST:PORT", parse: parse_tls },
    Scheme { prefix: "unix:", what: "a hub's unix socket", form: "unix:PATH", parse: parse_unix },
    Scheme { prefix: "shm://", what: "a local hub's shared memory", form: "shm://NAME", parse: parse_shm },
    Scheme {
        prefix: "ivshmem://",
        what: "an ivshmem region a hub serves (from a QEMU guest)",
        form: "ivshmem://PATH",
        parse: parse_ivshmem,
    },
    Scheme {
        prefix: "serial:",
        what: "a character device to a hub's unix socket (a QEMU guest's virtio-serial port)",
        form: "serial:PATH",
        parse: parse_serial,
    },
];

/// Every form of [`SCHEMES`] as messages list them: `tcp://HOST:PORT, …,
/// ivshmem://PATH or serial:PATH`.
pub const FORMS: &str = match std::str::from_utf8(&FORMS_BYTES) {
    Ok(text) => text,
    Err(_) => panic!("the forms are joined at character boundaries"),
};
const FORMS_BYTES: [u8; forms_text_len("", "")] = forms_text("", "");

/// The length of [`forms_text`]`(before, after)`: its `N`.
pub const fn forms_text_len(before: &str, after: &str) -> usize {
    let mut len = before.len() + after.len();
    let mut index = 0;
    while index < SCHEMES.len() {
        len += separator(index).len() + SCHEMES[index].form.len();
        index += 1;
    }
    len
}

/// `before`, [`FORMS`], `after`, as bytes. A `const fn` so that a text
/// which must be a constant — the C library's static `FH_ERR_INVALID_URL`
/// message — is still made from [`SCHEMES`]. `N` must be
/// [`forms_text_len`]`(before, after)` (else it does not compile).
pub const fn forms_text<const N: usize>(before: &str, after: &str) -> [u8; N] {
    let mut text = [0; N];
    let mut at = put(&mut text, 0, before);
    let mut index = 0;
    while index < SCHEMES.len() {
        at = put(&mut text, at, separator(index));
        at = put(&mut text, at, SCHEMES[index].form);
        index += 1;
    }
    assert!(put(&mut text, at, after) == N, "N is not forms_text_len(before, after)");
    text
}

/// What goes before the form at `index` in a list of forms: nothing before
/// the first, " or " before the last, ", " otherwise.
const fn separator(index: usize) -> &'static str {
    if index == 0 {
        ""
    } else if index + 1 == SCHEMES.len() {
        " or "
    } else {
        ", "
    }
}

/// Copy `part` into `text` at `at`; where it ends.
const fn put<const N: usize>(text: &mut [u8; N], mut at: usize, part: &str) -> usize {
    let bytes = part.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        text[at] = bytes[index];
        at += 1;
        index += 1;
    }
    at
}

/// Environment variable that overrides the default hub URL.
pub const HUB_ENV: &str = "FIELDHUB_HUB";

/// Shared-memory name the built-in hub configuration serves.
pub const DEFAULT_SHM_NAME: &str = "default";

/// Where a hub runs by default: `$FIELDHUB_HUB` if set; else the local hub
/// over shared memory (`shm://default`) when its session socket exists —
/// the hub removes it when it stops; else the local hub on its default TCP
/// port.
pub fn default_hub_url() -> String {
    if let Ok(url) = std::env::var(HUB_ENV) {
        return url;
    }
    // Only in this user's private directory: a socket another user planted
    // in a directory of theirs is not a hub to try.
    let dir = crate::shm_socket::socket_dir();
    let serves_shm = crate::shm_socket::check_private_dir(&dir).is_ok()
        && crate::shm_socket::socket_path(DEFAULT_SHM_NAME).is_ok_and(|path| path.exists());
    if serves_shm {
        format!("shm://{DEFAULT_SHM_NAME}")
    } else {
        format!("tcp://127.0.0.1:{DEFAULT_TCP_PORT}")
    }
}

/// A parsed hub URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HubUrl {
    /// `tcp://HOST:PORT`; HOST may be a name.
    Tcp { host: String, port: u16 },
    /// `tls://HOST:PORT`: TCP to a hub that speaks TLS (`[hub] tls_cert`);
    /// the hub's certificate must hold HOST (or `FIELDHUB_TLS_SERVER_NAME`).
    Tls { host: String, port: u16 },
    /// `unix:PATH` (also `unix://PATH`).
    Unix(PathBuf),
    /// `shm://NAME[?busy_poll=1][&dir=PATH]`: a local hub serving shared
    /// memory under NAME (`fieldhub hub --shm NAME`). With `busy_poll` the
    /// client spins instead of sleeping while it waits (lowest latency,
    /// costs a core). `dir`: the private directory of its session socket
    /// when it is not the usual one (the hub's ready line says so; the
    /// usual one was another user's).
    Shm { name: String, busy_poll: bool, dir: Option<PathBuf> },
    /// `serial:PATH` (also `serial://PATH`): a character device opened
    /// read+write as the byte stream, as a QEMU guest's virtio-serial port
    /// (`serial:/dev/vport0p1`) whose host end is the hub's unix socket.
    Serial(PathBuf),
    /// `ivshmem://PATH`: an ivshmem region a hub serves
    /// (`fieldhub hub --ivshmem FILE`): in a QEMU guest the device's BAR,
    /// `ivshmem:///sys/bus/pci/devices/0000:00:03.0/resource2`; on the host
    /// the backing file itself.
    Ivshmem(PathBuf),
}

impl HubUrl {
    /// Parse a URL, explaining what a valid one looks like on failure.
    pub fn parse(url: &str) -> Result<Self, String> {
        for scheme in SCHEMES {
            if let Some(rest) = url.strip_prefix(scheme.prefix) {
                return (scheme.parse)(scheme, rest);
            }
        }
        Err(match url.split_once("://") {
            Some((scheme, _)) => format!("unsupported scheme '{scheme}'; use {FORMS}"),
            None => format!("expected {FORMS}"),
        })
    }
}

/// `HOST:PORT` after `tcp://`.
fn parse_tcp(scheme: &Scheme, rest: &str) -> Result<HubUrl, String> {
    let (host, port) = host_port(scheme, rest)?;
    Ok(HubUrl::Tcp { host, port })
}

/// `HOST:PORT` after `tls://`.
fn parse_tls(scheme: &Scheme, rest: &str) -> Result<HubUrl, String> {
    let (host, port) = host_port(scheme, rest)?;
    Ok(HubUrl::Tls { host, port })
}

/// `HOST:PORT`, HOST a name or an address (IPv6 in brackets).
fn host_port(scheme: &Scheme, rest: &str) -> Result<(String, u16), String> {
    let form = scheme.form;
    let (host, port) = rest.rsplit_once(':').ok_or(format!("missing port; expected {form}"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("missing host; expected {form}"));
    }
    let port = port.parse::<u16>().map_err(|_| format!("'{port}' is not a port number"))?;
    // Digits and dots are an IPv4 address, never a name (RFC 1123 names
    // end in a letter): 256.1.1.1 is a typo to say, not a name to look up.
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') && host.parse::<std::net::Ipv4Addr>().is_err() {
        return Err(format!("'{host}' is not an IPv4 address: four numbers 0 to 255 with dots, as in 127.0.0.1"));
    }
    Ok((host.to_owned(), port))
}

/// `PATH` after `unix:`; `unix://PATH` is taken too, as URLs are often
/// written with `//`.
fn parse_unix(_: &Scheme, rest: &str) -> Result<HubUrl, String> {
    let path = rest.strip_prefix("//").unwrap_or(rest);
    if path.is_empty() {
        return Err("unix: needs a socket path, as in unix:/run/fieldhub.sock".into());
    }
    Ok(HubUrl::Unix(PathBuf::from(path)))
}

/// `PATH` after `serial:`; `serial://PATH` is taken too, as with `unix:`.
fn parse_serial(_: &Scheme, rest: &str) -> Result<HubUrl, String> {
    let path = rest.strip_prefix("//").unwrap_or(rest);
    if path.is_empty() {
        return Err("serial: needs a device path, as in serial:/dev/vport0p1".into());
    }
    Ok(HubUrl::Serial(PathBuf::from(path)))
}

/// The absolute `PATH` after `ivshmem://`.
fn parse_ivshmem(_: &Scheme, path: &str) -> Result<HubUrl, String> {
    if !path.starts_with('/') {
        return Err("ivshmem:// needs an absolute path, as in \
                    ivshmem:///sys/bus/pci/devices/0000:00:03.0/resource2"
            .into());
    }
    Ok(HubUrl::Ivshmem(PathBuf::from(path)))
}

/// Where the hub serving `shm://NAME` (in `dir` when its URL names one)
/// publishes the address of its control API (`spec/shm.md` 5.1). On
/// Windows there is none: shared memory is Linux-only.
pub fn shm_control_path(name: &str, dir: Option<&Path>) -> Result<PathBuf, String> {
    match dir {
        Some(dir) => crate::shm_socket::control_path_in(dir, name),
        None => crate::shm_socket::control_path(name),
    }
}

/// `NAME[?busy_poll=0|1][&dir=PATH]` after `shm://`.
fn parse_shm(_: &Scheme, rest: &str) -> Result<HubUrl, String> {
    let (name, query) = rest.split_once('?').unwrap_or((rest, ""));
    crate::shm_socket::check_name(name)?;
    let (mut busy_poll, mut dir) = (false, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("busy_poll", "1" | "true")) => busy_poll = true,
            Some(("busy_poll", "0" | "false")) => busy_poll = false,
            Some(("dir", path)) if path.starts_with('/') => dir = Some(PathBuf::from(path)),
            Some(("dir", path)) => return Err(format!("shm:// dir={path} is not an absolute path")),
            _ => {
                return Err(format!(
                    "unknown shm:// option '{pair}'; the options are busy_poll=0|1 and dir=PATH (the private \
                     directory a hub's ready line names)"
                ))
            }
        }
    }
    Ok(HubUrl::Shm { name: name.to_owned(), busy_poll, dir })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_address_out_of_range_is_an_invalid_url_not_a_name() {
        for url in ["tcp://256.1.1.1:5", "tls://1.2.3:5", "tcp://1.2.3.4.5:5"] {
            let why = HubUrl::parse(url).unwrap_err();
            assert!(why.contains("is not an IPv4 address"), "{url}: {why}");
        }
        assert!(HubUrl::parse("tcp://10.0.0.255:5").is_ok());
        assert!(HubUrl::parse("tcp://hub-3:5").is_ok(), "names stay names");
    }

    #[test]
    fn a_url_of_no_known_form_is_told_every_form() {
        for url in ["http://hub:80", "hub:29536"] {
            let why = HubUrl::parse(url).unwrap_err();
            for form in ["tcp://", "tls://", "unix:", "shm://", "ivshmem://", "serial:"] {
                assert!(why.contains(form), "{url}: '{why}' does not mention {form}");
            }
        }
    }

    #[test]
    fn the_forms_are_listed_in_the_table_s_order() {
        assert_eq!(FORMS, "tcp://HOST:PORT, tls://HOST:PORT, unix:PATH, shm://NAME, ivshmem://PATH or serial:PATH");
        assert_eq!(&forms_text::<{ forms_text_len("(", ")") }>("(", ")")[..], format!("({FORMS})").as_bytes());
    }

    #[test]
    fn no_prefix_is_the_start_of_another() {
        for a in SCHEMES {
            for b in SCHEMES.iter().filter(|b| b.prefix != a.prefix) {
                assert!(!b.prefix.starts_with(a.prefix), "{} would take {}'s URLs", a.prefix, b.prefix);
            }
        }
    }

    #[test]
    fn parses_tcp_and_unix() {
        assert_eq!(HubUrl::parse("tcp://127.0.0.1:29536"), Ok(HubUrl::Tcp { host: "127.0.0.1".into(), port: 29536 }));
        assert_eq!(HubUrl::parse("tcp://[::1]:5"), Ok(HubUrl::Tcp { host: "::1".into(), port: 5 }));
        assert_eq!(HubUrl::parse("unix:/tmp/x"), Ok(HubUrl::Unix("/tmp/x".into())));
        assert_eq!(HubUrl::parse("unix:///tmp/x"), Ok(HubUrl::Unix("/tmp/x".into())));
        assert!(HubUrl::parse("unix://").unwrap_err().contains("unix:/run/fieldhub.sock"));
    }

    #[test]
    fn parses_tls() {
        assert_eq!(
            HubUrl::parse("tls://hub.example:29536"),
            Ok(HubUrl::Tls { host: "hub.example".into(), port: 29536 })
        );
        assert_eq!(HubUrl::parse("tls://[::1]:5"), Ok(HubUrl::Tls { host: "::1".into(), port: 5 }));
        assert!(HubUrl::parse("tls://x").unwrap_err().contains("expected tls://HOST:PORT"));
    }

    #[test]
    fn parses_serial_device_paths() {
        assert_eq!(HubUrl::parse("serial:/dev/vport0p1"), Ok(HubUrl::Serial("/dev/vport0p1".into())));
        let bar = "/sys/bus/pci/devices/0000:00:03.0/resource2";
        assert_eq!(HubUrl::parse(&format!("ivshmem://{bar}")), Ok(HubUrl::Ivshmem(bar.into())));
        assert!(HubUrl::parse("ivshmem://dev/shm/x").unwrap_err().contains("absolute path"));
        assert_eq!(HubUrl::parse("serial:///dev/vport0p1"), Ok(HubUrl::Serial("/dev/vport0p1".into())));
        assert!(HubUrl::parse("serial:").unwrap_err().contains("serial:/dev/vport0p1"));
    }

    #[test]
    fn rejects_unknown_schemes_with_a_hint() {
        assert!(HubUrl::parse("http://x:1").unwrap_err().contains("unsupported scheme 'http'"));
        assert!(HubUrl::parse("tcp://x").unwrap_err().contains("missing port"));
        assert!(HubUrl::parse("tcp://x:99999").is_err());
    }

    #[test]
    fn parses_shm_names_and_the_busy_poll_option() {
        assert_eq!(HubUrl::parse("shm://bench"), Ok(HubUrl::Shm { name: "bench".into(), busy_poll: false, dir: None }));
        assert_eq!(
            HubUrl::parse("shm://b?busy_poll=1"),
            Ok(HubUrl::Shm { name: "b".into(), busy_poll: true, dir: None })
        );
        let dir = Some(PathBuf::from("/tmp/fieldhub-0-0123456789abcdef"));
        let url = "shm://b?dir=/tmp/fieldhub-0-0123456789abcdef&busy_poll=1";
        assert_eq!(HubUrl::parse(url), Ok(HubUrl::Shm { name: "b".into(), busy_poll: true, dir }));
        assert!(HubUrl::parse("shm://b?dir=relative").unwrap_err().contains("not an absolute path"));
        assert!(HubUrl::parse("shm://a/b").unwrap_err().contains("not a valid shared-memory hub name"));
        assert!(HubUrl::parse("shm://a?spin=1").unwrap_err().contains("busy_poll"));
        assert!(HubUrl::parse("shm://").is_err());
    }
}
