//! Hub URLs: `tcp://HOST:PORT`, `tls://HOST:PORT`, `unix:PATH`, `shm://NAME`,
//! `ivshmem://PATH` and `serial:PATH`. Every message about a URL that is none of them lists
//! them all ([`SCHEMES`]).

use std::path::PathBuf;

use fieldhub_proto::limits::DEFAULT_TCP_PORT;

/// Every form of hub URL, as error messages list them.
pub const SCHEMES: &str = "tcp://HOST:PORT, tls://HOST:PORT, unix:PATH, shm://NAME, ivshmem://PATH or serial:PATH";

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
    let serves_shm = fieldhub_shm::socket::socket_path(DEFAULT_SHM_NAME).is_ok_and(|path| path.exists());
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
    /// `shm://NAME[?busy_poll=1]`: a local hub serving shared memory under
    /// NAME (`fieldhub hub --shm NAME`). With `busy_poll` the client spins
    /// instead of sleeping while it waits (lowest latency, costs a core).
    Shm { name: String, busy_poll: bool },
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
        if let Some(rest) = url.strip_prefix("shm://") {
            return parse_shm(rest);
        }
        if let Some(path) = url.strip_prefix("unix://").or_else(|| url.strip_prefix("unix:")) {
            if path.is_empty() {
                return Err("unix: needs a socket path, as in unix:/run/fieldhub.sock".into());
            }
            return Ok(Self::Unix(PathBuf::from(path)));
        }
        if let Some(path) = url.strip_prefix("serial://").or_else(|| url.strip_prefix("serial:")) {
            if path.is_empty() {
                return Err("serial: needs a device path, as in serial:/dev/vport0p1".into());
            }
            return Ok(Self::Serial(PathBuf::from(path)));
        }
        if let Some(path) = url.strip_prefix("ivshmem://") {
            if !path.starts_with('/') {
                return Err("ivshmem:// needs an absolute path, as in \
                            ivshmem:///sys/bus/pci/devices/0000:00:03.0/resource2"
                    .into());
            }
            return Ok(Self::Ivshmem(PathBuf::from(path)));
        }
        let (scheme, rest) = match (url.strip_prefix("tcp://"), url.strip_prefix("tls://")) {
            (Some(rest), _) => ("tcp", rest),
            (_, Some(rest)) => ("tls", rest),
            _ => {
                return Err(match url.split_once("://") {
                    Some((scheme, _)) => format!("unsupported scheme '{scheme}'; use {SCHEMES}"),
                    None => format!("expected {SCHEMES}"),
                })
            }
        };
        let (host, port) = rest.rsplit_once(':').ok_or(format!("missing port; expected {scheme}://HOST:PORT"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("missing host; expected {scheme}://HOST:PORT"));
        }
        let port = port.parse::<u16>().map_err(|_| format!("'{port}' is not a port number"))?;
        let host = host.to_owned();
        Ok(if scheme == "tls" { Self::Tls { host, port } } else { Self::Tcp { host, port } })
    }
}

/// `NAME[?busy_poll=0|1]` after `shm://`.
fn parse_shm(rest: &str) -> Result<HubUrl, String> {
    let (name, query) = rest.split_once('?').unwrap_or((rest, ""));
    fieldhub_shm::socket::check_name(name)?;
    let mut busy_poll = false;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("busy_poll", "1" | "true")) => busy_poll = true,
            Some(("busy_poll", "0" | "false")) => busy_poll = false,
            _ => return Err(format!("unknown shm:// option '{pair}'; the only option is busy_poll=0|1")),
        }
    }
    Ok(HubUrl::Shm { name: name.to_owned(), busy_poll })
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn parses_tcp_and_unix() {
        assert_eq!(HubUrl::parse("tcp://127.0.0.1:29536"), Ok(HubUrl::Tcp { host: "127.0.0.1".into(), port: 29536 }));
        assert_eq!(HubUrl::parse("tcp://[::1]:5"), Ok(HubUrl::Tcp { host: "::1".into(), port: 5 }));
        assert_eq!(HubUrl::parse("unix:/tmp/x"), Ok(HubUrl::Unix("/tmp/x".into())));
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
        assert_eq!(HubUrl::parse("shm://bench"), Ok(HubUrl::Shm { name: "bench".into(), busy_poll: false }));
        assert_eq!(HubUrl::parse("shm://b?busy_poll=1"), Ok(HubUrl::Shm { name: "b".into(), busy_poll: true }));
        assert!(HubUrl::parse("shm://a/b").unwrap_err().contains("not a valid shared-memory hub name"));
        assert!(HubUrl::parse("shm://a?spin=1").unwrap_err().contains("busy_poll"));
        assert!(HubUrl::parse("shm://").is_err());
    }
}
