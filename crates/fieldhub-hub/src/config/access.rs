//! `[[access]]`: per-client permissions (`docs/security.md`, "Per-client
//! permissions"). Each table is one token, read from `token_file` by the
//! binary (never from the configuration text), and what its clients may do:
//! the channels their ports receive on (`read`), the channels they may send
//! on (`write`), and whether they may change the hub through the control API
//! (`control`). Everything not granted is denied.
//!
//! Checked in two steps: the structure (names, channels) when the text is
//! parsed, the secrets (needs the hub's token, every token distinct) once
//! the binary has read them ([`check_tokens`], `HubConfig::check_access_tokens`), because
//! the hub's own token may come from `--token-file` or the environment.

use std::path::PathBuf;

use fieldhub_proto::limits::MAX_TOKEN_LEN;
use serde::Deserialize;

use super::source::ConfigSource;
use fieldhub_bus::names::check_name;

use super::hub_section::HubSection;

/// The channel pattern that grants every channel, those created later
/// through the control API included.
pub const ALL_CHANNELS: &str = "*";

/// `[[access]]`: one token and what its clients may do.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessConfig {
    /// Names the grant in logs, refusals and statistics.
    pub name: String,
    /// File holding the token (owner-only, read like `--token-file`).
    pub token_file: PathBuf,
    /// The secret read from `token_file` by the binary; never in the text.
    #[serde(skip)]
    pub token: Option<String>,
    /// Channels its ports receive on; `"*"`: every channel.
    #[serde(default)]
    pub read: Vec<String>,
    /// Channels its ports may send on; `"*"`: every channel.
    #[serde(default)]
    pub write: Vec<String>,
    /// May it change the hub through the control API?
    #[serde(default)]
    pub control: bool,
}

/// Check the `[[access]]` tables' names and channels (`channel_ref`: the
/// configuration's check that a channel exists).
pub fn check(
    access: &[AccessConfig],
    hub: &HubSection,
    channel_ref: impl Fn(&str) -> Result<(), String>,
    source: &ConfigSource<'_>,
) -> Result<(), (String, String)> {
    for (i, a) in access.iter().enumerate() {
        let field = |key: &str| source.table_field("access", i, key);
        check_name(&a.name).map_err(|m| (field("name"), m))?;
        if access[..i].iter().any(|other| other.name == a.name) {
            return Err((field("name"), format!("access '{}' is defined twice; give each a name of its own", a.name)));
        }
        if a.token_file.as_os_str().is_empty() {
            return Err((field("token_file"), "names no file; give the file holding this access's token".into()));
        }
        for (key, channels) in [("read", &a.read), ("write", &a.write)] {
            for channel in channels.iter().filter(|c| *c != ALL_CHANNELS) {
                channel_ref(channel)
                    .map_err(|m| (field(key), format!("{m}; or \"{ALL_CHANNELS}\" for every channel")))?;
            }
        }
    }
    check_tokens(access, hub, source)
}

/// Check the `[[access]]` tokens read so far: each needs the hub's token
/// beside it and differs from it, from the monitor token and from every
/// other. Tokens not read yet are checked when they are.
pub fn check_tokens(
    access: &[AccessConfig],
    hub: &HubSection,
    source: &ConfigSource<'_>,
) -> Result<(), (String, String)> {
    for (i, a) in access.iter().enumerate() {
        let Some(token) = &a.token else { continue };
        let field = || source.table_field("access", i, "token_file");
        if token.is_empty() || token.len() > MAX_TOKEN_LEN {
            return Err((field(), format!("the token must be 1 to {MAX_TOKEN_LEN} bytes")));
        }
        let Some(hub_token) = &hub.token else {
            let text = "needs the hub's token (--token-file, FIELDHUB_TOKEN_FILE or [hub] token): per-client \
                            permissions are tokens beside the hub's";
            return Err((field(), text.into()));
        };
        let same_as = if token == hub_token {
            Some("the hub's token".to_owned())
        } else if hub.monitor_token.as_ref() == Some(token) {
            Some("the monitor token".to_owned())
        } else {
            access[..i].iter().find(|o| o.token.as_ref() == Some(token)).map(|o| format!("access '{}''s", o.name))
        };
        if let Some(other) = same_as {
            return Err((field(), format!("holds the same token as {other}; give each access a token of its own")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::HubConfig;

    const CHANNELS: &str = "[[channel]]\nname = \"can0\"\n[[channel]]\nname = \"can1\"\n";

    fn parse(access: &str) -> Result<HubConfig, String> {
        HubConfig::parse(&format!("[hub]\ntoken = \"sesame\"\n{CHANNELS}{access}"), "t.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_deny_everything_and_the_token_is_never_read_from_the_text() {
        let config = parse("[[access]]\nname = \"hil\"\ntoken_file = \"/etc/hil.token\"\n").unwrap();
        let access = &config.access[0];
        assert!(access.read.is_empty() && access.write.is_empty() && !access.control);
        assert_eq!(access.token, None, "read by the binary");
        assert!(parse("[[access]]\nname = \"hil\"\ntoken_file = \"/t\"\ntoken = \"x\"\n").is_err(), "no token key");
    }

    #[test]
    fn an_unknown_channel_is_named_with_its_line() {
        let err =
            parse("[[access]]\nname = \"hil\"\ntoken_file = \"/t\"\nread = [\"can0\", \"*\"]\nwrite = [\"can2\"]\n")
                .unwrap_err();
        assert!(err.contains("line 11: access[0].write: no channel named 'can2'"), "{err}");
    }

    #[test]
    fn a_name_defined_twice_is_named_with_its_line() {
        let one = "[[access]]\nname = \"hil\"\ntoken_file = \"/t\"\n";
        let err = parse(&format!("{one}{one}")).unwrap_err();
        assert!(err.contains("line 11: access[1].name: access 'hil' is defined twice"), "{err}");
        let err = parse("[[access]]\nname = \"h i l\"\ntoken_file = \"/t\"\n").unwrap_err();
        assert!(err.contains("line 8: access[0].name"), "{err}");
    }

    #[test]
    fn tokens_read_need_the_hubs_token_and_must_all_differ() {
        let two = "[[access]]\nname = \"a\"\ntoken_file = \"/a\"\n[[access]]\nname = \"b\"\ntoken_file = \"/b\"\n";
        let text = format!("[hub]\nmonitor_token = \"look\"\ntoken = \"sesame\"\n{CHANNELS}{two}");
        let mut config = HubConfig::parse(&text, "t.toml").unwrap();
        let check = |config: &HubConfig| config.validate_text(&text, "t.toml").map_err(|e| e.to_string());
        config.access[0].token = Some("alpha".into());
        config.access[1].token = Some("beta".into());
        assert!(check(&config).is_ok());
        for (same, what) in [("sesame", "the hub's token"), ("look", "the monitor token"), ("alpha", "access 'a''s")] {
            config.access[1].token = Some(same.into());
            let err = check(&config).unwrap_err();
            assert!(
                err.contains("line 13: access[1].token_file: holds the same token as") && err.contains(what),
                "{err}"
            );
        }
        config.access[1].token = Some("beta".into());
        config.hub.token = None;
        config.hub.monitor_token = None;
        let err = check(&config).unwrap_err();
        assert!(err.contains("line 10: access[0].token_file: needs the hub's token"), "{err}");
    }
}
