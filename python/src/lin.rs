//! The LIN node API's frames (`spec/protocol.md` 4.1.1), which
//! `NativeClient.send_lin` sends: a one-shot response (`publish`), a
//! standing response (`stand`: it answers every unconditional header of its
//! identifier until replaced or withdrawn), its withdrawal (`withdraw`), or
//! a wake-up pulse on a sleeping channel (`wake_up`).

use fieldhub_client::Frame;
use fieldhub_proto::lin::Checksum;
use pyo3::PyResult;

use crate::error;

/// The frame `form` names for identifier `id` with `data` under the classic
/// checksum (`classic`) or the enhanced one; `invalid` says what is wrong.
pub fn lin_frame(form: &str, id: u8, data: &[u8], classic: bool) -> PyResult<Frame> {
    let model = if classic { Checksum::Classic } else { Checksum::Enhanced };
    let made = match form {
        "publish" => Frame::lin(id, model, data),
        "stand" => Frame::lin_standing(id, model, data),
        "withdraw" if data.is_empty() && !classic => Frame::lin_withdraw(id),
        "withdraw" => {
            return Err(error("invalid", "a withdrawal names an identifier only: no data, no checksum model".into()))
        }
        "wake_up" if id == 0 && data.is_empty() && !classic => Ok(Frame::lin_wake_up()),
        "wake_up" => return Err(error("invalid", "a wake-up pulse has no identifier, data or checksum model".into())),
        other => {
            return Err(error(
                "invalid",
                format!("LIN form '{other}' is not one of publish, stand, withdraw, wake_up"),
            ));
        }
    };
    made.map_err(|e| error("invalid", e.to_string()))
}
