//! Each device as torch sees it under the device's pin, matched to the device kactors listed by
//! UUID on NVIDIA.

use std::path::Path;

use crate::devices::{Device, DeviceKind};
use crate::vendor::Vendor;

use super::probe::{Probe, ProbeRunner, text};
use super::python::build_name;
use super::report::CheckLine;

/// Device `device` as torch sees it under the device's pin: exactly one device, and on NVIDIA
/// the one with the UUID nvidia-smi gave. (On ROCm torch's UUID is reported but not compared:
/// its form next to amd-smi's hip_uuid is not documented.)
pub(super) async fn device_check(
    runner: &ProbeRunner<'_>,
    python: &Path,
    vendor: Vendor,
    device: &Device,
) -> CheckLine {
    let pin = device.pin();
    let what = format!("device {} visible to torch under {pin}", device.id);
    let probe = Probe::python(
        python,
        &["device"],
        Some(&pin),
        &format!("device {} check", device.id),
    );
    let answer = runner.answer_about(probe, &what, |error| {
        format!("torch failed to query it: {error}; check the driver with nvidia-smi or amd-smi")
    });
    let answer = match answer.await {
        Ok(answer) => answer,
        Err(line) => return line,
    };
    let count = answer["count"].as_u64().unwrap_or(0);
    if count != 1 {
        return CheckLine::fail(
            what,
            format!(
                "torch sees {count} devices, where the pin leaves exactly one ({}); check that \
                 the driver and torch's {} runtime work for this user",
                device.name,
                build_name(vendor)
            ),
        );
    }
    let name = text(&answer["name"]);
    let torch_uuid = text(&answer["uuid"]);
    let expected = device.uuid();
    let same = expected.is_some_and(|uuid| same_uuid(uuid, &torch_uuid));
    let comparable = matches!(device.kind, DeviceKind::Nvidia { .. });
    if comparable && !same {
        return CheckLine::fail(
            what,
            format!(
                "torch's device has UUID {torch_uuid} ({name}), nvidia-smi's {} has {}; the pin \
                 selects another GPU than the one kactors listed",
                device.name,
                expected.unwrap_or("none")
            ),
        );
    }
    CheckLine::ok(format!(
        "{what}: {name} ({})",
        expected.unwrap_or(&torch_uuid)
    ))
}

/// `GPU-5beddb9d-b3cb-...` (nvidia-smi) and `5beddb9d-b3cb-...` (torch) name one GPU: compared
/// by their hexadecimal digits.
fn same_uuid(listed: &str, torch: &str) -> bool {
    let digits = |uuid: &str| -> String {
        let bare = ["GPU-", "MIG-"]
            .iter()
            .find_map(|prefix| uuid.strip_prefix(prefix))
            .unwrap_or(uuid);
        bare.chars()
            .filter(char::is_ascii_hexdigit)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let listed = digits(listed);
    !listed.is_empty() && listed == digits(torch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_and_torch_uuids_are_compared_by_their_digits() {
        let listed = "GPU-5beddb9d-b3cb-7e53-54c9-13c55d854a1f";
        assert!(same_uuid(listed, "5beddb9d-b3cb-7e53-54c9-13c55d854a1f"));
        assert!(same_uuid(listed, "5BEDDB9D-B3CB-7E53-54C9-13C55D854A1F"));
        assert!(!same_uuid(listed, "5beddb9d-b3cb-7e53-54c9-13c55d854a1e"));
        assert!(!same_uuid(listed, ""));
        assert!(!same_uuid("GPU-", ""), "nothing to compare is no match");
    }
}
