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
    #[error("federation: the token may not contain line breaks or start or end with spaces")]
    BadToken,
    #[error("federation: cannot write the token's dictionary for Zenoh: {error}")]
    Dictionary { error: std::io::Error },
    #[error("federation: cannot start a thread for channel '{channel}': {error}")]
    Thread { channel: String, error: std::io::Error },
    #[error(
        "federation: this fieldhub was built without federation (cargo feature `federation` of fieldhub-hub); \
         remove [federation] from the configuration or use a build with it, such as `make install`"
    )]
    NotBuilt,
}
