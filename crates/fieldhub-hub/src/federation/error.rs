//! Why the federation could not start.

#[derive(Debug, thiserror::Error)]
pub enum FederationError {
    #[error("federation: cannot configure Zenoh ({key}): {error}")]
    Config { key: &'static str, error: String },
    #[error("federation: cannot open the Zenoh session (listen {listen:?}, connect {connect:?}): {error}")]
    Open { listen: Vec<String>, connect: Vec<String>, error: String },
    #[error(
        "federation: the token file {} was not read; a hub reads it when it starts (`fieldhub hub` does)",
        path.display()
    )]
    TokenNotRead { path: std::path::PathBuf },
    #[error(
        "federation: [federation] names no token_file, and this user has no place for its own federation token \
         (neither XDG_CONFIG_HOME nor HOME is set): set token_file to an owner-only file holding a secret every \
         hub of the federation shares"
    )]
    NoTokenPlace,
    #[error("federation: a link without a token was asked for; every federation link is authenticated")]
    NoToken,
    #[error(
        "federation: [federation] names no token_file, so this hub uses its user's own federation token in {}, \
         which it cannot use: {error}. Fix that, or set token_file to an owner-only file holding a secret every \
         hub of the federation shares",
        path.display()
    )]
    OwnToken { path: std::path::PathBuf, error: std::io::Error },
    #[error("federation: the token may not contain line breaks or start or end with spaces")]
    BadToken,
    #[error("federation: cannot write the token's dictionary for Zenoh: {error}")]
    Dictionary { error: std::io::Error },
    #[error(
        "federation: ZENOH_RUNTIME is set in the hub's environment but empty, which Zenoh cannot parse: unset it \
         (the hub then sets its own) or give Zenoh's runtime settings, e.g. ZENOH_RUNTIME='(rx: (worker_threads: 1))'"
    )]
    EmptyZenohRuntime,
    #[error("federation: cannot start a thread for channel '{channel}': {error}")]
    Thread { channel: String, error: std::io::Error },
    #[error(
        "federation: this fieldhub was built without federation (cargo feature `federation` of fieldhub-hub); \
         remove [federation] from the configuration or use a build with it, such as `make install`"
    )]
    NotBuilt,
}
