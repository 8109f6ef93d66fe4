use std::num::NonZeroU32;

use super::device::{Device, DeviceKind, DeviceSelection};
use super::environment::HostEnvironment;
use super::error::DeviceError;
use super::masks::{AmdMasks, Mask, VisibilityMasks, resolve_masks};
use super::nvidia::{NvidiaGpu, apply_cuda_mask, list_nvidia_gpus};
use super::rocm::{AmdGpu, apply_amd_masks, list_amd_gpus};
use super::specs::{AmdIdentity, amd_row, nvidia_row, spec_by_name, spec_table};
use super::tool::{Listing, TOOL_TIMEOUT};
use crate::vendor::{Platform, PlatformRequest, Vendor};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRequest {
    pub platform: PlatformRequest,
    /// `--gpus`: device ids, as listed, to restrict the chosen devices to.
    pub gpus: Option<Vec<u32>>,
    /// How many devices the noop platform provides.
    pub noop_devices: NonZeroU32,
    /// The configured GPU model: its spec row is used when detection finds none.
    pub gpu_name: Option<String>,
}

/// Chooses the vendor and the devices a run uses, as issue 3 settles it: visibility masks
/// applied to the tools' listings (neither tool honours them), the vendor decided from what
/// remains and what was requested, `--gpus` applied, and each device's spec row found.
/// kactors never widens a job beyond what its masks allow, and never makes up a GPU.
pub fn select_devices(
    request: &DeviceRequest,
    host: &HostEnvironment,
) -> Result<DeviceSelection, DeviceError> {
    let (platform, devices, mut warnings) = match request.platform {
        // A simulated device has no spec: gpu_name is not looked up, so KernelAgent's files,
        // whatever GPU they name, run on noop.
        PlatformRequest::Exactly(Platform::Noop) => {
            let devices = (0..request.noop_devices.get())
                .map(|id| Device {
                    id,
                    name: "noop".to_string(),
                    kind: DeviceKind::Noop,
                    spec: None,
                })
                .collect();
            (Platform::Noop, devices, Vec::new())
        }
        PlatformRequest::Detect => detect_vendor(host)?,
        PlatformRequest::Exactly(Platform::Vendor(Vendor::Nvidia)) => require_nvidia(host)?,
        PlatformRequest::Exactly(Platform::Vendor(Vendor::Rocm)) => require_rocm(host)?,
    };
    let mut devices = restrict_to_listed(devices, request.gpus.as_deref(), platform)?;
    if platform != Platform::Noop {
        settle_specs(&mut devices, request.gpu_name.as_deref(), &mut warnings);
    }
    Ok(DeviceSelection {
        platform,
        devices,
        warnings,
    })
}

type Chosen = (Platform, Vec<Device>, Vec<String>);

/// No platform requested: NVIDIA when a GPU survives CUDA_VISIBLE_DEVICES and no HIP/ROCR mask
/// selects an AMD GPU; AMD when no NVIDIA GPU remains or such a mask leaves an AMD GPU.
fn detect_vendor(host: &HostEnvironment) -> Result<Chosen, DeviceError> {
    let masks = resolve_masks(host)?;
    let nvidia = nvidia_view(host, &masks);
    // amd-smi is asked only when its answer can choose AMD.
    let amd = (masks.amd_selection.is_some() || nvidia.visible.is_empty())
        .then(|| amd_view(host, &masks.amd));
    match amd {
        Some(amd) if !amd.visible.is_empty() => Ok(amd.chosen_over(Some(nvidia))),
        amd if !nvidia.visible.is_empty() => Ok(nvidia.chosen_over(amd)),
        amd => Err(DeviceError::NoGpuVisible {
            notes: nvidia
                .notes()
                .chain(amd.iter().flat_map(View::notes))
                .collect(),
        }),
    }
}

/// NVIDIA requested: the GPUs CUDA_VISIBLE_DEVICES leaves, unless a HIP/ROCR mask selects an
/// AMD GPU (the job was set up for AMD).
fn require_nvidia(host: &HostEnvironment) -> Result<Chosen, DeviceError> {
    let masks = resolve_masks(host)?;
    let amd = match &masks.amd_selection {
        Some(selection) => {
            let amd = amd_view(host, &masks.amd);
            if !amd.visible.is_empty() {
                return Err(DeviceError::NvidiaRequestedRocmSelected {
                    masks: selection.clone(),
                });
            }
            Some(amd)
        }
        None => None,
    };
    let nvidia = nvidia_view(host, &masks);
    if nvidia.visible.is_empty() {
        return Err(DeviceError::NvidiaNoneVisible {
            notes: nvidia.notes().collect(),
        });
    }
    Ok(nvidia.chosen_over(amd))
}

/// ROCm requested: the AMD GPUs the masks leave, whatever nvidia-smi would list.
fn require_rocm(host: &HostEnvironment) -> Result<Chosen, DeviceError> {
    let masks = resolve_masks(host)?;
    let amd = amd_view(host, &masks.amd);
    if amd.visible.is_empty() {
        return Err(DeviceError::RocmNoneVisible {
            notes: amd.notes().collect(),
        });
    }
    Ok(amd.chosen_over(None))
}

/// What one vendor's tool and masks leave.
struct View {
    vendor: Vendor,
    visible: Vec<Device>,
    /// Why nothing is visible, when nothing is.
    why_none: Option<String>,
    /// The tool failed: worth a warning even when the other vendor is chosen.
    tool_failed: bool,
    /// About the listed GPUs, for when this vendor is chosen.
    warnings: Vec<String>,
}

impl View {
    fn nothing(vendor: Vendor, why_none: String) -> Self {
        Self {
            vendor,
            visible: Vec::new(),
            why_none: Some(why_none),
            tool_failed: false,
            warnings: Vec::new(),
        }
    }

    fn from_listing<'m, T>(
        vendor: Vendor,
        listing: Listing<T>,
        tool: &str,
        keep: impl FnOnce(&[T]) -> (Vec<Device>, Vec<&'m Mask>),
    ) -> Self {
        let gpus = match listing {
            Listing::ToolNotFound { searched } => {
                return Self::nothing(vendor, format!("{tool} was not found on {searched}"));
            }
            Listing::ToolFailed(failure) => {
                return Self {
                    tool_failed: true,
                    ..Self::nothing(vendor, failure.to_string())
                };
            }
            Listing::Gpus(gpus) => gpus,
        };
        let (visible, masks) = keep(&gpus);
        let why_none = match (visible.is_empty(), gpus.len()) {
            (false, _) => None,
            (true, 0) => Some(format!("{tool} lists no GPU")),
            (true, listed) => Some(format!(
                "none of the {listed} {} GPUs {tool} lists is left by {}",
                vendor_word(vendor),
                masks
                    .iter()
                    .map(|mask| mask.describe())
                    .collect::<Vec<_>>()
                    .join(" then ")
            )),
        };
        Self {
            vendor,
            visible,
            why_none,
            tool_failed: false,
            warnings: Vec::new(),
        }
    }

    fn notes(&self) -> impl Iterator<Item = String> + '_ {
        self.why_none.iter().cloned()
    }

    fn chosen_over(self, other: Option<View>) -> Chosen {
        let mut warnings = self.warnings;
        if let Some(other) = other.filter(|other| other.tool_failed) {
            warnings.extend(other.why_none.map(|failure| {
                format!(
                    "{} GPUs are not considered: {failure}",
                    vendor_word(other.vendor)
                )
            }));
        }
        (self.vendor.into(), self.visible, warnings)
    }
}

fn vendor_word(vendor: Vendor) -> &'static str {
    match vendor {
        Vendor::Nvidia => "NVIDIA",
        Vendor::Rocm => "AMD",
    }
}

fn nvidia_view(host: &HostEnvironment, masks: &VisibilityMasks) -> View {
    let vendor = Vendor::Nvidia;
    let cuda = masks.cuda.as_ref();
    if let Some(mask) = cuda.filter(|mask| mask.hides_all()) {
        return View::nothing(
            vendor,
            format!("{} hides every NVIDIA GPU", mask.describe()),
        );
    }
    let listing = list_nvidia_gpus(host, TOOL_TIMEOUT);
    View::from_listing(vendor, listing, "nvidia-smi", |gpus| {
        let kept = match cuda {
            Some(mask) => apply_cuda_mask(gpus, mask),
            None => gpus.to_vec(),
        };
        (
            kept.into_iter().map(nvidia_device).collect(),
            cuda.into_iter().collect(),
        )
    })
}

fn amd_view(host: &HostEnvironment, masks: &AmdMasks) -> View {
    let vendor = Vendor::Rocm;
    let (rocr, hip) = match masks {
        AmdMasks::Hidden(mask) => {
            return View::nothing(vendor, format!("{} hides every AMD GPU", mask.describe()));
        }
        AmdMasks::Apply { rocr, hip } => (rocr.as_ref(), hip.as_ref()),
    };
    let listed = list_amd_gpus(host, TOOL_TIMEOUT);
    let view = View::from_listing(vendor, listed.listing, "amd-smi", |gpus| {
        let kept = apply_amd_masks(gpus, rocr, hip);
        (
            kept.into_iter().map(amd_device).collect(),
            rocr.into_iter().chain(hip).collect(),
        )
    });
    View {
        warnings: listed.warnings,
        ..view
    }
}

fn nvidia_device(gpu: NvidiaGpu) -> Device {
    Device {
        id: gpu.index,
        spec: nvidia_row(spec_table(), &gpu.name),
        name: gpu.name,
        kind: DeviceKind::Nvidia {
            uuid: gpu.uuid,
            bus_id: gpu.bus_id,
        },
    }
}

fn amd_device(gpu: AmdGpu) -> Device {
    let identity = AmdIdentity {
        market_name: gpu.market_name.as_deref(),
        chip_id: gpu.chip_id,
        gfx_target: gpu.gfx_target.as_deref(),
        compute_units: gpu.compute_units,
    };
    Device {
        id: gpu.hip_id,
        spec: amd_row(spec_table(), identity),
        name: gpu
            .market_name
            .unwrap_or_else(|| format!("AMD GPU at {}", gpu.bdf)),
        kind: DeviceKind::Rocm {
            hip_uuid: gpu.hip_uuid,
            bdf: gpu.bdf,
            gfx_target: gpu.gfx_target,
        },
    }
}

/// `--gpus`: keeps the listed devices, in the selection's order.
fn restrict_to_listed(
    devices: Vec<Device>,
    gpus: Option<&[u32]>,
    platform: Platform,
) -> Result<Vec<Device>, DeviceError> {
    let Some(ids) = gpus else {
        return Ok(devices);
    };
    if ids.is_empty() {
        return Err(DeviceError::EmptyGpuList);
    }
    if let Some(missing) = ids
        .iter()
        .find(|id| !devices.iter().any(|device| device.id == **id))
    {
        return Err(DeviceError::GpuNotVisible {
            id: *missing,
            platform,
            visible: devices
                .iter()
                .map(|device| device.id.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(devices
        .into_iter()
        .filter(|device| ids.contains(&device.id))
        .collect())
}

/// The detected row wins; the configured gpu_name fills in only where detection found none. A
/// gpu_name that names no row is never an error (KernelAgent's files carry names of their own):
/// the warning says which row each device uses instead.
fn settle_specs(devices: &mut [Device], gpu_name: Option<&str>, warnings: &mut Vec<String>) {
    let configured = gpu_name.map(|name| (name, spec_by_name(name)));
    for device in devices {
        let (id, name) = (device.id, &device.name);
        match (device.spec, configured) {
            (Some(detected), Some((_, Some(configured)))) if detected.name != configured.name => {
                warnings.push(format!(
                    "configured gpu_name {:?} disagrees with GPU {id}, detected as {:?}; using \
                     the detected row",
                    configured.name, detected.name
                ));
            }
            (Some(detected), Some((unknown, None))) => warnings.push(format!(
                "configured gpu_name {unknown:?} names no row of the GPU spec table; using GPU \
                 {id}'s detected row {:?}",
                detected.name
            )),
            (Some(_), _) => {}
            (None, Some((_, Some(configured)))) => {
                warnings.push(format!(
                    "no spec row matches GPU {id} ({name:?}); using the configured gpu_name's \
                     row {:?}",
                    configured.name
                ));
                device.spec = Some(configured);
            }
            (None, Some((unknown, None))) => warnings.push(format!(
                "configured gpu_name {unknown:?} names no row of the GPU spec table and no row \
                 matches GPU {id} ({name:?}); its spec is null (rows are in data/gpu_specs.yaml)"
            )),
            (None, None) => warnings.push(format!(
                "no spec row matches GPU {id} ({name:?}); its spec is null (rows are in \
                 data/gpu_specs.yaml)"
            )),
        }
    }
}

/// What a run is told when the workers asked for (num_workers or `--workers`) are not every
/// device there is (`available`, `offered by the allocation's nodes`): more than there are, or
/// fewer, which leaves devices unused. One line, or none when the run takes every device.
pub fn workers_note(wanted: Option<u32>, available: usize, there: &str) -> Option<String> {
    let wanted = wanted? as usize;
    if wanted > available {
        Some(format!(
            "{wanted} workers were asked for but {available} device(s) are {there}: using {available}"
        ))
    } else if wanted < available {
        Some(format!(
            "using {wanted} of the {available} devices {there} (num_workers or --workers): {} left unused; without either, a run uses every one",
            available - wanted
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fake_tools::FakeNode;
    use crate::devices::masks::{CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES};

    const CVD: &str = CUDA_VISIBLE_DEVICES;
    const HVD: &str = HIP_VISIBLE_DEVICES;
    const RVD: &str = ROCR_VISIBLE_DEVICES;
    const CONFLICT_0_1: &str = "CUDA_VISIBLE_DEVICES=\"0\" conflicts with HIP_VISIBLE_DEVICES=\"1\": \
                                set only one of them, or both to the same list";
    const NO_NVIDIA_SMI: &str = "nvidia-smi was not found on PATH";
    const NO_AMD_SMI: &str = "amd-smi was not found on PATH, <node>/venv/bin (beside the \
                              configured python) or <node>/rocm/bin";

    fn nvidia_only() -> FakeNode {
        let node = FakeNode::new();
        node.nvidia_smi("nvidia-smi-h100x4.csv", 0);
        node
    }

    fn amd_only() -> FakeNode {
        let node = FakeNode::new();
        node.four_mi300x_amd_smi(&node.bin());
        node
    }

    fn mixed() -> FakeNode {
        let node = nvidia_only();
        node.four_mi300x_amd_smi(&node.bin());
        node
    }

    fn request(platform: PlatformRequest) -> DeviceRequest {
        DeviceRequest {
            platform,
            gpus: None,
            noop_devices: NonZeroU32::new(2).unwrap(),
            gpu_name: None,
        }
    }

    /// "vendor id,id,..." or the error's message, with the node's directory as `<node>`.
    fn outcome(node: &FakeNode, request: &DeviceRequest, vars: &[(&str, &str)]) -> String {
        let text = match select_devices(request, &node.host(vars)) {
            Ok(selection) => {
                assert!(
                    selection
                        .devices
                        .iter()
                        .all(|device| device.platform() == selection.platform)
                );
                let ids: Vec<String> = selection.devices.iter().map(|d| d.id.to_string()).collect();
                format!("{} {}", selection.platform, ids.join(","))
            }
            // Every "none visible" ends with the dry run's hint; the cases here are about
            // what was seen, and `no_gpu_visible_points_to_the_dry_run` about the hint.
            Err(error) => error
                .to_string()
                .trim_end_matches(crate::devices::error::NOOP_HINT)
                .to_string(),
        };
        let root = node.bin().parent().unwrap().display().to_string();
        text.replace(&root, "<node>")
    }

    /// A platform, the host's variables, and the expected outcome.
    type Case<'a> = (PlatformRequest, Vars<'a>, &'a str);

    fn check(node: &FakeNode, cases: &[Case<'_>]) {
        for (platform, vars, expected) in cases {
            assert_eq!(
                outcome(node, &request(*platform), vars),
                *expected,
                "{platform:?} with {vars:?}"
            );
        }
    }

    type Vars<'a> = &'a [(&'a str, &'a str)];
    const AUTO: PlatformRequest = PlatformRequest::Detect;
    const NOOP: PlatformRequest = PlatformRequest::NOOP;
    const NVIDIA: PlatformRequest = PlatformRequest::Exactly(Platform::Vendor(Vendor::Nvidia));
    const ROCM: PlatformRequest = PlatformRequest::Exactly(Platform::Vendor(Vendor::Rocm));

    /// Issue 22: a first run on a host without a GPU is pointed at the dry run.
    #[test]
    fn no_gpu_visible_points_to_the_dry_run() {
        for platform in [AUTO, NVIDIA] {
            let message = select_devices(&request(platform), &amd_only().host(&[(HVD, "")]))
                .unwrap_err()
                .to_string();
            assert!(
                message.ends_with(
                    " (without a GPU, `--strategy noop` makes the dry run: simulated devices, no \
                     Python, no API key)"
                ),
                "{message}"
            );
        }
    }

    #[test]
    fn nvidia_only_node() {
        let hidden = format!(
            "no GPU visible: CUDA_VISIBLE_DEVICES=\"\" hides every NVIDIA GPU; {NO_AMD_SMI}"
        );
        let rocm_none =
            format!("ROCm platform was requested but no devices are visible: {NO_AMD_SMI}");
        let left_none = format!(
            "no GPU visible: none of the 4 NVIDIA GPUs nvidia-smi lists is left by \
             CUDA_VISIBLE_DEVICES=\"7\"; {NO_AMD_SMI}"
        );
        check(
            &nvidia_only(),
            &[
                (AUTO, &[], "nvidia 0,1,2,3"),
                (AUTO, &[(CVD, "2,0")], "nvidia 2,0"),
                (AUTO, &[(CVD, "GPU-1d6a")], "nvidia 1"),
                (AUTO, &[(CVD, "0,7,1")], "nvidia 0"),
                (AUTO, &[(CVD, "")], &hidden),
                (AUTO, &[(CVD, "7")], &left_none),
                // A HIP mask on a node without AMD GPUs selects nothing.
                (AUTO, &[(HVD, "0")], "nvidia 0,1,2,3"),
                (NVIDIA, &[], "nvidia 0,1,2,3"),
                (NVIDIA, &[(HVD, "0")], "nvidia 0,1,2,3"),
                (NVIDIA, &[(CVD, "3")], "nvidia 3"),
                (ROCM, &[], &rocm_none),
                (NOOP, &[], "noop 0,1"),
            ],
        );
    }

    #[test]
    fn amd_only_node() {
        let nvidia_none =
            format!("NVIDIA platform was requested but no devices are visible: {NO_NVIDIA_SMI}");
        check(
            &amd_only(),
            &[
                (AUTO, &[], "rocm 0,1,2,3"),
                (ROCM, &[], "rocm 0,1,2,3"),
                (NVIDIA, &[], &nvidia_none),
                (AUTO, &[(HVD, "3,1")], "rocm 3,1"),
                (AUTO, &[(RVD, "GPU-5566778899aabbcc,0")], "rocm 2,0"),
                (
                    AUTO,
                    &[(HVD, "")],
                    "no GPU visible: nvidia-smi was not found on PATH; HIP_VISIBLE_DEVICES=\"\" \
                     hides every AMD GPU",
                ),
                (
                    ROCM,
                    &[(RVD, "")],
                    "ROCm platform was requested but no devices are visible: \
                     ROCR_VISIBLE_DEVICES=\"\" hides every AMD GPU",
                ),
                (
                    AUTO,
                    &[(HVD, "0,x")],
                    "HIP_VISIBLE_DEVICES=\"0,x\" has the entry \"x\", which is neither a device \
                     index nor a GPU UUID (GPU-...)",
                ),
                (NOOP, &[], "noop 0,1"),
            ],
        );
    }

    /// The three worked examples of the issue.
    #[test]
    fn rocr_then_hip() {
        check(
            &amd_only(),
            &[
                (AUTO, &[(RVD, "1,2,3"), (HVD, "2")], "rocm 3"),
                (ROCM, &[(RVD, "0"), (HVD, "0")], "rocm 0"),
                (
                    ROCM,
                    &[(RVD, "0"), (HVD, "1")],
                    "ROCm platform was requested but no devices are visible: none of the 4 AMD \
                     GPUs amd-smi lists is left by ROCR_VISIBLE_DEVICES=\"0\" then \
                     HIP_VISIBLE_DEVICES=\"1\"",
                ),
            ],
        );
    }

    #[test]
    fn cuda_visible_devices_on_an_amd_only_node_is_the_hip_mask() {
        let nvidia_none =
            format!("NVIDIA platform was requested but no devices are visible: {NO_NVIDIA_SMI}");
        check(
            &amd_only(),
            &[
                (AUTO, &[(CVD, "1,3")], "rocm 1,3"),
                (ROCM, &[(CVD, "2")], "rocm 2"),
                // HIP stops at an entry it cannot read, as CUDA does.
                (AUTO, &[(CVD, "1,MIG-x,3")], "rocm 1"),
                // It never invents an NVIDIA GPU.
                (NVIDIA, &[(CVD, "1")], &nvidia_none),
                // An empty CUDA_VISIBLE_DEVICES hides NVIDIA GPUs only.
                (AUTO, &[(CVD, "")], "rocm 0,1,2,3"),
            ],
        );
    }

    #[test]
    fn conflict_and_the_identical_list_exception() {
        let conflict_rocr = "CUDA_VISIBLE_DEVICES=\"0,1\" conflicts with ROCR_VISIBLE_DEVICES=\"1\": \
                             set only one of them, or both to the same list";
        let node = amd_only();
        check(
            &node,
            &[
                (AUTO, &[(CVD, "0"), (HVD, "1")], CONFLICT_0_1),
                (ROCM, &[(CVD, "0"), (HVD, "1")], CONFLICT_0_1),
                (NVIDIA, &[(CVD, "0,1"), (RVD, "1")], conflict_rocr),
                // Slurm's identical lists: applied once, as ROCR (as HIP too it would give [3]).
                (AUTO, &[(CVD, "2,3"), (RVD, "2,3")], "rocm 2,3"),
                (
                    ROCM,
                    &[(CVD, "2,3"), (RVD, "2, 3"), (HVD, "2,3")],
                    "rocm 2,3",
                ),
                (AUTO, &[(CVD, "1"), (HVD, "1")], "rocm 1"),
                // An empty list is no conflict.
                (AUTO, &[(CVD, ""), (HVD, "1")], "rocm 1"),
                // noop skips the check.
                (NOOP, &[(CVD, "0"), (HVD, "1")], "noop 0,1"),
            ],
        );
    }

    #[test]
    fn mixed_node_without_masks() {
        let node = mixed();
        check(
            &node,
            &[
                (AUTO, &[], "nvidia 0,1,2,3"),
                (NVIDIA, &[], "nvidia 0,1,2,3"),
                (ROCM, &[], "rocm 0,1,2,3"),
                (NOOP, &[], "noop 0,1"),
            ],
        );
    }

    #[test]
    fn mixed_node_with_masks_and_no_platform() {
        let left_none = "no GPU visible: none of the 4 NVIDIA GPUs nvidia-smi lists is left by \
                         CUDA_VISIBLE_DEVICES=\"7\"; none of the 4 AMD GPUs amd-smi lists is left \
                         by CUDA_VISIBLE_DEVICES=\"7\"";
        check(
            &mixed(),
            &[
                (AUTO, &[(CVD, "1")], "nvidia 1"),
                (AUTO, &[(HVD, "2")], "rocm 2"),
                (AUTO, &[(RVD, "1,2,3"), (HVD, "2")], "rocm 3"),
                (AUTO, &[(CVD, "")], "rocm 0,1,2,3"),
                (AUTO, &[(HVD, "")], "nvidia 0,1,2,3"),
                (AUTO, &[(RVD, "")], "nvidia 0,1,2,3"),
                (
                    AUTO,
                    &[(CVD, ""), (HVD, "")],
                    "no GPU visible: CUDA_VISIBLE_DEVICES=\"\" hides every NVIDIA GPU; \
                     HIP_VISIBLE_DEVICES=\"\" hides every AMD GPU",
                ),
                // A HIP mask that selects no AMD GPU does not choose AMD.
                (AUTO, &[(HVD, "9")], "nvidia 0,1,2,3"),
                (AUTO, &[(CVD, "7")], left_none),
                (AUTO, &[(CVD, "0,1"), (RVD, "0,1")], "rocm 0,1"),
                (AUTO, &[(CVD, "0"), (HVD, "1")], CONFLICT_0_1),
            ],
        );
    }

    #[test]
    fn mixed_node_with_masks_and_nvidia_requested() {
        check(
            &mixed(),
            &[
                (NVIDIA, &[(CVD, "3")], "nvidia 3"),
                (
                    NVIDIA,
                    &[(HVD, "1")],
                    "NVIDIA platform was requested but ROCm devices were selected (by \
                     HIP_VISIBLE_DEVICES=\"1\")",
                ),
                (
                    NVIDIA,
                    &[(CVD, "0,1"), (RVD, "0,1")],
                    "NVIDIA platform was requested but ROCm devices were selected (by \
                     ROCR_VISIBLE_DEVICES=\"0,1\")",
                ),
                (NVIDIA, &[(HVD, "9")], "nvidia 0,1,2,3"),
                (NVIDIA, &[(HVD, "")], "nvidia 0,1,2,3"),
                (
                    NVIDIA,
                    &[(CVD, "")],
                    "NVIDIA platform was requested but no devices are visible: \
                     CUDA_VISIBLE_DEVICES=\"\" hides every NVIDIA GPU",
                ),
                (NVIDIA, &[(CVD, "0"), (HVD, "1")], CONFLICT_0_1),
            ],
        );
    }

    #[test]
    fn mixed_node_with_masks_and_rocm_requested() {
        check(
            &mixed(),
            &[
                (ROCM, &[(CVD, "2")], "rocm 2"),
                (ROCM, &[(HVD, "3,1")], "rocm 3,1"),
                (ROCM, &[(RVD, "1,2,3"), (HVD, "2")], "rocm 3"),
                (ROCM, &[(CVD, "")], "rocm 0,1,2,3"),
                (
                    ROCM,
                    &[(HVD, "")],
                    "ROCm platform was requested but no devices are visible: \
                     HIP_VISIBLE_DEVICES=\"\" hides every AMD GPU",
                ),
                (ROCM, &[(CVD, "0"), (HVD, "1")], CONFLICT_0_1),
            ],
        );
    }

    #[test]
    fn mixed_node_with_masks_and_noop_requested() {
        let node = mixed();
        check(
            &node,
            &[
                (NOOP, &[(CVD, "0"), (HVD, "1")], "noop 0,1"),
                (NOOP, &[(HVD, "x")], "noop 0,1"),
                (NOOP, &[(CVD, "")], "noop 0,1"),
            ],
        );
        assert_eq!(node.calls(), Vec::<String>::new());
    }

    #[test]
    fn only_the_tools_a_decision_needs_are_called() {
        let nvidia_smi = "nvidia-smi --query-gpu=index,name,uuid,pci.bus_id --format=csv";
        let amd_smi = ["amd-smi list -e --json", "amd-smi static --asic --json"];
        let cases: [(PlatformRequest, Vars, Vec<&str>); 6] = [
            (AUTO, &[], vec![nvidia_smi]),
            (NVIDIA, &[], vec![nvidia_smi]),
            (ROCM, &[], amd_smi.to_vec()),
            (AUTO, &[(HVD, "1")], [&[nvidia_smi][..], &amd_smi].concat()),
            (AUTO, &[(CVD, ""), (HVD, "")], vec![]),
            (NOOP, &[], vec![]),
        ];
        for (platform, vars, calls) in cases {
            let node = mixed();
            outcome(&node, &request(platform), vars);
            assert_eq!(node.calls(), calls, "{platform:?} with {vars:?}");
        }
    }

    #[test]
    fn hosts_without_gpus() {
        let node = FakeNode::new();
        let none = format!("no GPU visible: {NO_NVIDIA_SMI}; {NO_AMD_SMI}");
        check(&node, &[(AUTO, &[], &none), (NOOP, &[], "noop 0,1")]);
        let node = FakeNode::new();
        node.nvidia_smi("nvidia-smi-no-devices.txt", 6);
        let none = format!("no GPU visible: nvidia-smi lists no GPU; {NO_AMD_SMI}");
        check(&node, &[(AUTO, &[], &none), (NOOP, &[], "noop 0,1")]);
        assert_eq!(
            node.calls(),
            vec!["nvidia-smi --query-gpu=index,name,uuid,pci.bus_id --format=csv"]
        );
    }

    #[test]
    fn failing_tools_are_named_when_no_vendor_can_be_chosen() {
        let node = FakeNode::new();
        node.nvidia_smi("nvidia-smi-driver-failure.txt", 9);
        node.amd_smi(&node.bin(), "amd-smi-not-a-listing.txt", "");
        assert_eq!(
            outcome(&node, &request(AUTO), &[]),
            "no GPU visible: <node>/bin/nvidia-smi --query-gpu=index,name,uuid,pci.bus_id \
             --format=csv failed (exit status: 9): NVIDIA-SMI has failed because it \
             couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver \
             is installed and running.; <node>/bin/amd-smi list -e --json printed output that is \
             not amd-smi's JSON list or its \"GPU: n\" text blocks: no \"GPU: n\" block"
        );
    }

    #[test]
    fn a_failing_tool_of_the_other_vendor_is_a_warning() {
        let node = nvidia_only();
        node.amd_smi(&node.bin(), "amd-smi-not-a-listing.txt", "");
        let selection = select_devices(&request(AUTO), &node.host(&[(HVD, "1")])).unwrap();
        assert_eq!(selection.platform, Platform::Vendor(Vendor::Nvidia));
        assert_eq!(
            selection.warnings,
            vec![format!(
                "AMD GPUs are not considered: {}/amd-smi list -e --json printed output that is \
                 not amd-smi's JSON list or its \"GPU: n\" text blocks: no \"GPU: n\" block",
                node.bin().display()
            )]
        );
    }

    #[test]
    fn amd_smi_beside_an_unresolved_venv_python() {
        let node = FakeNode::new();
        let venv_bin = node.venv_with_symlinked_python();
        node.four_mi300x_amd_smi(&venv_bin);
        check(
            &node,
            &[(AUTO, &[], "rocm 0,1,2,3"), (ROCM, &[(HVD, "1")], "rocm 1")],
        );
    }

    #[test]
    fn gpus_restricts_the_chosen_devices() {
        let node = mixed();
        let with_gpus = |platform, gpus: &[u32]| DeviceRequest {
            gpus: Some(gpus.to_vec()),
            ..request(platform)
        };
        assert_eq!(outcome(&node, &with_gpus(AUTO, &[2, 0]), &[]), "nvidia 0,2");
        assert_eq!(
            outcome(&node, &with_gpus(ROCM, &[3]), &[(HVD, "3,1")]),
            "rocm 3"
        );
        assert_eq!(outcome(&node, &with_gpus(NOOP, &[1]), &[]), "noop 1");
        assert_eq!(
            outcome(&node, &with_gpus(ROCM, &[0]), &[(HVD, "3,1")]),
            "--gpus lists GPU 0, which is not among the visible rocm devices (3, 1)"
        );
        assert_eq!(
            outcome(&node, &with_gpus(AUTO, &[]), &[]),
            "--gpus lists no GPU"
        );
    }

    fn specs_and_warnings(
        node: &FakeNode,
        platform: PlatformRequest,
        gpu_name: Option<&str>,
    ) -> (Vec<Option<String>>, Vec<String>) {
        let request = DeviceRequest {
            gpu_name: gpu_name.map(str::to_string),
            ..request(platform)
        };
        let selection = select_devices(&request, &node.host(&[])).unwrap();
        let specs = selection
            .devices
            .iter()
            .map(|device| device.spec.map(|spec| spec.name.clone()))
            .collect();
        (specs, selection.warnings)
    }

    fn some(name: &str, count: usize) -> Vec<Option<String>> {
        vec![Some(name.to_string()); count]
    }

    #[test]
    fn detected_specs() {
        assert_eq!(
            specs_and_warnings(&mixed(), AUTO, None),
            (some("NVIDIA H100 SXM", 4), vec![])
        );
        assert_eq!(
            specs_and_warnings(&mixed(), ROCM, None),
            (some("AMD Instinct MI300X", 4), vec![])
        );
        let node = FakeNode::new();
        node.amd_smi(
            &node.bin(),
            "amd-smi-list-e-mi250x.json",
            "amd-smi-static-asic-mi250x.json",
        );
        assert_eq!(
            specs_and_warnings(&node, AUTO, None),
            (some("AMD Instinct MI250X", 2), vec![])
        );
        let node = FakeNode::new();
        node.amd_smi(
            &node.bin(),
            "amd-smi-list-e-mi300a.txt",
            "amd-smi-static-asic-mi300a.txt",
        );
        assert_eq!(
            specs_and_warnings(&node, AUTO, None),
            (some("AMD Instinct MI300A", 1), vec![])
        );
    }

    #[test]
    fn an_unknown_gpu_gets_no_spec_and_a_warning() {
        let node = FakeNode::new();
        node.nvidia_smi("nvidia-smi-tesla-m40.csv", 0);
        assert_eq!(
            specs_and_warnings(&node, AUTO, None),
            (
                vec![None],
                vec![
                    "no spec row matches GPU 0 (\"Tesla M40 24GB\"); its spec is null (rows are \
                     in data/gpu_specs.yaml)"
                        .to_string()
                ]
            )
        );
    }

    #[test]
    fn a_configured_gpu_name_fills_in_only_where_detection_finds_no_row() {
        let node = FakeNode::new();
        node.nvidia_smi("nvidia-smi-tesla-m40.csv", 0);
        assert_eq!(
            specs_and_warnings(&node, AUTO, Some("NVIDIA H100 PCIe")),
            (
                some("NVIDIA H100 PCIe", 1),
                vec![
                    "no spec row matches GPU 0 (\"Tesla M40 24GB\"); using the configured \
                     gpu_name's row \"NVIDIA H100 PCIe\""
                        .to_string()
                ]
            )
        );
        let (specs, warnings) = specs_and_warnings(&nvidia_only(), AUTO, Some("NVIDIA H100 PCIe"));
        assert_eq!(specs, some("NVIDIA H100 SXM", 4));
        assert_eq!(
            warnings[0],
            "configured gpu_name \"NVIDIA H100 PCIe\" disagrees with GPU 0, detected as \"NVIDIA \
             H100 SXM\"; using the detected row"
        );
        assert_eq!(warnings.len(), 4);
        // Naming the detected GPU by its nvidia-smi name agrees with it.
        assert_eq!(
            specs_and_warnings(&nvidia_only(), AUTO, Some("NVIDIA H100 80GB HBM3")),
            (some("NVIDIA H100 SXM", 4), vec![])
        );
    }

    #[test]
    fn the_noop_platform_never_looks_gpu_name_up() {
        for gpu_name in ["AMD Instinct MI300X", "NVIDIA GeForce RTX 5080", "H100"] {
            assert_eq!(
                specs_and_warnings(&nvidia_only(), NOOP, Some(gpu_name)),
                (vec![None, None], vec![])
            );
        }
    }

    #[test]
    fn an_unknown_gpu_name_is_a_warning_naming_the_row_used_instead() {
        let (specs, warnings) = specs_and_warnings(&nvidia_only(), AUTO, Some("H100"));
        assert_eq!(specs, some("NVIDIA H100 SXM", 4));
        assert_eq!(
            warnings[0],
            "configured gpu_name \"H100\" names no row of the GPU spec table; using GPU 0's \
             detected row \"NVIDIA H100 SXM\""
        );
        assert_eq!(warnings.len(), 4);
        let node = FakeNode::new();
        node.nvidia_smi("nvidia-smi-tesla-m40.csv", 0);
        assert_eq!(
            specs_and_warnings(&node, AUTO, Some("NVIDIA GeForce RTX 5080")),
            (
                vec![None],
                vec![
                    "configured gpu_name \"NVIDIA GeForce RTX 5080\" names no row of the GPU \
                     spec table and no row matches GPU 0 (\"Tesla M40 24GB\"); its spec is null \
                     (rows are in data/gpu_specs.yaml)"
                        .to_string()
                ]
            )
        );
    }

    #[test]
    fn kernelagents_gpu_name_is_the_h100_nvl_row() {
        let node = FakeNode::new();
        node.nvidia_smi("nvidia-smi-tesla-m40.csv", 0);
        let (specs, _) = specs_and_warnings(&node, AUTO, Some("NVIDIA H100 NVL 94GB"));
        assert_eq!(specs, some("NVIDIA H100 NVL", 1));
    }

    #[test]
    fn pins_follow_the_vendor() {
        let node = mixed();
        let nvidia = select_devices(&request(AUTO), &node.host(&[(CVD, "1")])).unwrap();
        assert_eq!(
            serde_json::to_value(nvidia.pins()).unwrap(),
            serde_json::json!([{
                "device": 1,
                "set": {"CUDA_VISIBLE_DEVICES": "GPU-1d6a7e61-0b4f-9d3c-2e8a-5f7c3b9a0e21"},
                "unset": []
            }])
        );
        let rocm =
            select_devices(&request(AUTO), &node.host(&[(RVD, "1,2,3"), (HVD, "2")])).unwrap();
        assert_eq!(
            serde_json::to_value(rocm.report()).unwrap(),
            serde_json::json!({
                "vendor": "rocm",
                "devices": [{"id": 3, "name": "AMD Instinct MI300X", "uuid": "GPU-d00dfeedcafe1234", "spec": "AMD Instinct MI300X"}],
                "pins": [{"device": 3, "set": {"HIP_VISIBLE_DEVICES": "3"}, "unset": ["CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"]}]
            })
        );
    }
}
