use super::environment::HostEnvironment;
use super::error::DeviceError;

pub(crate) const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";
pub(crate) const HIP_VISIBLE_DEVICES: &str = "HIP_VISIBLE_DEVICES";
pub(crate) const ROCR_VISIBLE_DEVICES: &str = "ROCR_VISIBLE_DEVICES";

/// One comma-separated entry of a visibility mask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MaskEntry {
    Index(u32),
    /// A GPU UUID as written (`GPU-...`); NVIDIA accepts prefixes of it, ROCm the whole.
    Uuid(String),
    /// Neither: the runtimes stop reading the list here.
    Invalid,
}

impl MaskEntry {
    fn parse(entry: &str) -> Self {
        let entry = entry.trim();
        let is_uuid = entry
            .get(..4)
            .is_some_and(|prefix| prefix.eq_ignore_ascii_case("GPU-"));
        if !entry.is_empty() && entry.bytes().all(|byte| byte.is_ascii_digit()) {
            entry.parse().map_or(Self::Invalid, Self::Index)
        } else if is_uuid {
            Self::Uuid(entry.to_string())
        } else {
            Self::Invalid
        }
    }
}

/// A visibility variable's value and its entries. A blank value has no entries and hides every
/// GPU of its vendor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mask {
    pub(crate) variable: &'static str,
    pub(crate) value: String,
    pub(crate) entries: Vec<MaskEntry>,
}

impl Mask {
    /// CUDA_VISIBLE_DEVICES: an invalid entry ends the list, as CUDA (and HIP, reading it as an
    /// alias) treats it, e.g. `0,2,-1,1` means 0 and 2 and `MIG-x` means none.
    pub(crate) fn lenient(variable: &'static str, value: &str) -> Self {
        let entries = if value.trim().is_empty() {
            Vec::new()
        } else {
            value.split(',').map(MaskEntry::parse).collect()
        };
        Self {
            variable,
            value: value.to_string(),
            entries,
        }
    }

    /// HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES: an entry that is neither an index nor a
    /// UUID is a mistake in the job's setup, reported rather than guessed around.
    fn strict(variable: &'static str, value: &str) -> Result<Self, DeviceError> {
        let mask = Self::lenient(variable, value);
        let invalid = value
            .split(',')
            .find(|entry| MaskEntry::parse(entry) == MaskEntry::Invalid);
        match invalid {
            Some(entry) if !mask.entries.is_empty() => Err(DeviceError::InvalidMaskEntry {
                variable,
                value: value.to_string(),
                entry: entry.trim().to_string(),
            }),
            _ => Ok(mask),
        }
    }

    pub(crate) fn hides_all(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn describe(&self) -> String {
        format!("{}={:?}", self.variable, self.value)
    }
}

/// The masks applied to AMD's listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AmdMasks {
    /// An empty HIP or ROCR mask: no AMD GPU is visible, and amd-smi is not asked.
    Hidden(Mask),
    /// ROCR first (selecting HIP ids), then HIP (indexing what ROCR left).
    Apply {
        rocr: Option<Mask>,
        hip: Option<Mask>,
    },
}

/// The visibility variables of the host, checked against each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VisibilityMasks {
    /// Applied to nvidia-smi's listing, which ignores it.
    pub(crate) cuda: Option<Mask>,
    pub(crate) amd: AmdMasks,
    /// The non-empty HIP/ROCR masks the job set, described; these (not CUDA_VISIBLE_DEVICES
    /// acting for HIP) are what choose AMD over NVIDIA.
    pub(crate) amd_selection: Option<String>,
}

/// Reads CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES.
///
/// A non-empty CUDA list beside a non-empty HIP or ROCR list is a conflict, unless the lists are
/// identical: Slurm sets CUDA_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES to the same list on AMD
/// nodes, and that list is then applied once, as ROCR_VISIBLE_DEVICES (applying it again as the
/// HIP mask would index the survivors a second time). CUDA_VISIBLE_DEVICES alone acts as the HIP
/// mask on AMD, as HIP honours it.
pub(crate) fn resolve_masks(host: &HostEnvironment) -> Result<VisibilityMasks, DeviceError> {
    let cuda = host
        .var(CUDA_VISIBLE_DEVICES)
        .map(|value| Mask::lenient(CUDA_VISIBLE_DEVICES, value));
    let hip = host
        .var(HIP_VISIBLE_DEVICES)
        .map(|value| Mask::strict(HIP_VISIBLE_DEVICES, value))
        .transpose()?;
    let rocr = host
        .var(ROCR_VISIBLE_DEVICES)
        .map(|value| Mask::strict(ROCR_VISIBLE_DEVICES, value))
        .transpose()?;

    let listing_cuda = cuda.as_ref().filter(|mask| !mask.hides_all());
    let listing_amd: Vec<&Mask> = [&rocr, &hip]
        .into_iter()
        .flatten()
        .filter(|mask| !mask.hides_all())
        .collect();
    if let Some(cuda) = listing_cuda
        && let Some(other) = listing_amd
            .iter()
            .find(|other| other.entries != cuda.entries)
    {
        return Err(DeviceError::ConflictingMasks {
            cuda: cuda.value.clone(),
            variable: other.variable,
            other: other.value.clone(),
        });
    }
    let amd_selection = (!listing_amd.is_empty()).then(|| {
        listing_amd
            .iter()
            .map(|mask| mask.describe())
            .collect::<Vec<_>>()
            .join(" and ")
    });

    let hiding = [&rocr, &hip]
        .into_iter()
        .flatten()
        .find(|mask| mask.hides_all());
    let amd = match (hiding, listing_cuda, listing_amd.first()) {
        (Some(hiding), _, _) => AmdMasks::Hidden(hiding.clone()),
        (None, Some(_), Some(same_list)) => AmdMasks::Apply {
            rocr: Some(Mask {
                variable: ROCR_VISIBLE_DEVICES,
                ..(*same_list).clone()
            }),
            hip: None,
        },
        (None, _, _) => {
            let hip = match (&hip, &rocr) {
                (None, None) => listing_cuda.cloned(),
                _ => hip.clone(),
            };
            AmdMasks::Apply {
                rocr: rocr.clone(),
                hip,
            }
        }
    };
    Ok(VisibilityMasks {
        cuda,
        amd,
        amd_selection,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    fn resolve(vars: &[(&str, &str)]) -> Result<VisibilityMasks, String> {
        let vars = vars
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect::<BTreeMap<_, _>>();
        resolve_masks(&HostEnvironment::new(vars, PathBuf::from("python3")))
            .map_err(|error| error.to_string())
    }

    fn mask(variable: &'static str, value: &str) -> Mask {
        Mask::lenient(variable, value)
    }

    #[test]
    fn entries_are_indices_uuids_or_invalid() {
        assert_eq!(
            mask(
                CUDA_VISIBLE_DEVICES,
                "0, 2,GPU-5bed,gpu-AB,-1,MIG-x,,99999999999"
            )
            .entries,
            vec![
                MaskEntry::Index(0),
                MaskEntry::Index(2),
                MaskEntry::Uuid("GPU-5bed".into()),
                MaskEntry::Uuid("gpu-AB".into()),
                MaskEntry::Invalid,
                MaskEntry::Invalid,
                MaskEntry::Invalid,
                MaskEntry::Invalid,
            ]
        );
        assert!(mask(CUDA_VISIBLE_DEVICES, "").hides_all());
        assert!(mask(CUDA_VISIBLE_DEVICES, "  ").hides_all());
    }

    #[test]
    fn no_variables_mean_no_masks() {
        assert_eq!(
            resolve(&[]).unwrap(),
            VisibilityMasks {
                cuda: None,
                amd: AmdMasks::Apply {
                    rocr: None,
                    hip: None
                },
                amd_selection: None,
            }
        );
    }

    #[test]
    fn cuda_alone_acts_as_the_hip_mask_but_does_not_select_amd() {
        let masks = resolve(&[(CUDA_VISIBLE_DEVICES, "1,3")]).unwrap();
        assert_eq!(masks.cuda, Some(mask(CUDA_VISIBLE_DEVICES, "1,3")));
        assert_eq!(
            masks.amd,
            AmdMasks::Apply {
                rocr: None,
                hip: Some(mask(CUDA_VISIBLE_DEVICES, "1,3"))
            }
        );
        assert_eq!(masks.amd_selection, None);
    }

    #[test]
    fn an_empty_cuda_mask_hides_nvidia_only() {
        let masks = resolve(&[(CUDA_VISIBLE_DEVICES, "")]).unwrap();
        assert!(masks.cuda.unwrap().hides_all());
        assert_eq!(
            masks.amd,
            AmdMasks::Apply {
                rocr: None,
                hip: None
            }
        );
    }

    #[test]
    fn an_empty_hip_or_rocr_mask_hides_amd() {
        for variable in [HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES] {
            let masks = resolve(&[(variable, ""), (CUDA_VISIBLE_DEVICES, "0")]).unwrap();
            assert_eq!(masks.amd, AmdMasks::Hidden(mask(variable, "")));
            assert_eq!(masks.cuda, Some(mask(CUDA_VISIBLE_DEVICES, "0")));
            assert_eq!(masks.amd_selection, None);
        }
    }

    #[test]
    fn rocr_and_hip_are_kept_in_order_and_select_amd() {
        let masks =
            resolve(&[(ROCR_VISIBLE_DEVICES, "1,2,3"), (HIP_VISIBLE_DEVICES, "2")]).unwrap();
        assert_eq!(
            masks.amd,
            AmdMasks::Apply {
                rocr: Some(mask(ROCR_VISIBLE_DEVICES, "1,2,3")),
                hip: Some(mask(HIP_VISIBLE_DEVICES, "2"))
            }
        );
        assert_eq!(
            masks.amd_selection.as_deref(),
            Some("ROCR_VISIBLE_DEVICES=\"1,2,3\" and HIP_VISIBLE_DEVICES=\"2\"")
        );
    }

    #[test]
    fn differing_cuda_and_amd_lists_conflict() {
        assert_eq!(
            resolve(&[(CUDA_VISIBLE_DEVICES, "0"), (HIP_VISIBLE_DEVICES, "1")]).unwrap_err(),
            "CUDA_VISIBLE_DEVICES=\"0\" conflicts with HIP_VISIBLE_DEVICES=\"1\": set only one \
             of them, or both to the same list"
        );
        assert_eq!(
            resolve(&[(CUDA_VISIBLE_DEVICES, "0,1"), (ROCR_VISIBLE_DEVICES, "0")]).unwrap_err(),
            "CUDA_VISIBLE_DEVICES=\"0,1\" conflicts with ROCR_VISIBLE_DEVICES=\"0\": set only \
             one of them, or both to the same list"
        );
    }

    #[test]
    fn identical_lists_are_applied_once_as_rocr() {
        for variable in [ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES] {
            let masks = resolve(&[(CUDA_VISIBLE_DEVICES, "0,1"), (variable, "0, 1")]).unwrap();
            assert_eq!(
                masks.amd,
                AmdMasks::Apply {
                    rocr: Some(Mask {
                        variable: ROCR_VISIBLE_DEVICES,
                        value: "0, 1".into(),
                        entries: vec![MaskEntry::Index(0), MaskEntry::Index(1)],
                    }),
                    hip: None,
                }
            );
            assert_eq!(masks.cuda, Some(mask(CUDA_VISIBLE_DEVICES, "0,1")));
            assert!(masks.amd_selection.is_some());
        }
    }

    #[test]
    fn an_empty_cuda_mask_does_not_conflict() {
        let masks = resolve(&[(CUDA_VISIBLE_DEVICES, ""), (HIP_VISIBLE_DEVICES, "1")]).unwrap();
        assert_eq!(
            masks.amd,
            AmdMasks::Apply {
                rocr: None,
                hip: Some(mask(HIP_VISIBLE_DEVICES, "1"))
            }
        );
    }

    #[test]
    fn an_amd_entry_that_is_neither_index_nor_uuid_is_an_error() {
        assert_eq!(
            resolve(&[(ROCR_VISIBLE_DEVICES, "0,gpu0")]).unwrap_err(),
            "ROCR_VISIBLE_DEVICES=\"0,gpu0\" has the entry \"gpu0\", which is neither a device \
             index nor a GPU UUID (GPU-...)"
        );
        assert_eq!(
            resolve(&[(HIP_VISIBLE_DEVICES, "-1")]).unwrap_err(),
            "HIP_VISIBLE_DEVICES=\"-1\" has the entry \"-1\", which is neither a device index \
             nor a GPU UUID (GPU-...)"
        );
    }

    #[test]
    fn an_invalid_cuda_entry_is_not_an_error() {
        assert!(resolve(&[(CUDA_VISIBLE_DEVICES, "MIG-x")]).is_ok());
    }
}
