//! The vendor, and the platform a run is on: the noop platform (no GPU) or one vendor's GPUs.
//! A strategy may also leave the platform to the devices found. Configuration, device
//! selection, the checks, the profilers and the prompts all speak of these three types.

use std::fmt;

use serde::{Serialize, Serializer};

pub use actors::model::Vendor;

/// The platform a run is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    /// No GPU: simulated devices, simulated verdicts and times.
    Noop,
    Vendor(Vendor),
}

impl Platform {
    /// The vendor of its GPUs; `None` on the noop platform.
    pub fn vendor(self) -> Option<Vendor> {
        match self {
            Platform::Noop => None,
            Platform::Vendor(vendor) => Some(vendor),
        }
    }

    /// `noop`, `nvidia` or `rocm`.
    pub fn name(self) -> &'static str {
        match self {
            Platform::Noop => "noop",
            Platform::Vendor(vendor) => vendor.name(),
        }
    }
}

impl From<Vendor> for Platform {
    fn from(vendor: Vendor) -> Self {
        Platform::Vendor(vendor)
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Platform {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// The platform a strategy asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlatformRequest {
    /// No platform named: the devices found decide.
    Detect,
    /// This platform and no other.
    Exactly(Platform),
}

impl PlatformRequest {
    pub const NOOP: Self = PlatformRequest::Exactly(Platform::Noop);

    /// `detect`, or the platform's name.
    pub fn name(self) -> &'static str {
        match self {
            PlatformRequest::Detect => "detect",
            PlatformRequest::Exactly(platform) => platform.name(),
        }
    }
}

impl From<Vendor> for PlatformRequest {
    fn from(vendor: Vendor) -> Self {
        PlatformRequest::Exactly(Platform::Vendor(vendor))
    }
}

impl Serialize for PlatformRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_platform_and_request_has_the_word_configurations_and_reports_use() {
        let check = |request: PlatformRequest, word: &str| {
            assert_eq!(request.name(), word);
            assert_eq!(
                serde_json::to_value(request).unwrap(),
                serde_json::json!(word)
            );
            if let PlatformRequest::Exactly(platform) = request {
                assert_eq!(platform.to_string(), word);
                assert_eq!(
                    serde_json::to_value(platform).unwrap(),
                    serde_json::json!(word)
                );
            }
        };
        check(PlatformRequest::Detect, "detect");
        check(PlatformRequest::NOOP, "noop");
        check(Vendor::Nvidia.into(), "nvidia");
        check(Vendor::Rocm.into(), "rocm");
        assert_eq!(
            serde_json::from_value::<Vendor>(serde_json::json!("rocm")).unwrap(),
            Vendor::Rocm
        );
        assert_eq!(Platform::Noop.vendor(), None);
        assert_eq!(Platform::from(Vendor::Rocm).vendor(), Some(Vendor::Rocm));
    }
}
