//! Decoded frames as the monitor shows them: `Message: Name=value unit …`.

use crate::Decoded;

/// Most digits after the decimal point a value is shown with.
const MAX_DECIMALS: usize = 9;

/// Digits after the decimal point that a signal's factor and offset can
/// produce: 0.1 needs one, 0.25 two, 1 none.
pub fn decimals(factor: f64, offset: f64) -> usize {
    let needed = |x: f64| {
        (0..=MAX_DECIMALS)
            .find(|&d| {
                let scaled = x.abs() * 10f64.powi(d as i32);
                (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
            })
            .unwrap_or(MAX_DECIMALS)
    };
    needed(factor).max(needed(offset))
}

/// One line for a decoded frame.
pub fn describe(decoded: &Decoded<'_>) -> String {
    let mut out = format!("{}:", decoded.message);
    for signal in &decoded.signals {
        out.push_str(&format!(" {}={:.*}", signal.name, signal.decimals, signal.value));
        if !signal.unit.is_empty() {
            out.push(' ');
            out.push_str(signal.unit);
        }
        if let Some(label) = signal.label {
            out.push_str(&format!(" ({label})"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_follow_the_scaling() {
        assert_eq!(decimals(1.0, 0.0), 0);
        assert_eq!(decimals(0.1, 0.0), 1);
        assert_eq!(decimals(0.25, -40.0), 2);
        assert_eq!(decimals(1.0, 0.5), 1);
    }
}
