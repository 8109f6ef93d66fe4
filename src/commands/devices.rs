//! `kactors devices`: the GPUs a run with the strategy would use, and what each worker's children
//! get in their environment.

use crate::cli::DevicesArgs;
use crate::config::CliOverrides;
use crate::console;

use super::CommandError;
use super::settings::load_strategy;

/// `kactors devices`: what a run with the strategy would use. Only the selection: no GPU is
/// locked, so it answers while a run holds the GPUs.
pub(super) fn devices(args: DevicesArgs) -> Result<(), CommandError> {
    let (request, python) = match &args.strategy {
        Some(name) => {
            let settings =
                load_strategy(&args.config_dir, name, &CliOverrides::default())?.settings;
            (
                crate::gpus::device_request(&settings, args.gpus),
                settings.python,
            )
        }
        None => (
            crate::gpus::detect_request(args.gpus),
            std::path::PathBuf::from("python3"),
        ),
    };
    let selection = crate::devices::select_devices(
        &request,
        &crate::devices::HostEnvironment::from_process(python),
    )?;
    for warning in &selection.warnings {
        console::err(format_args!("kactors: warning: {warning}"));
    }
    if args.json {
        console::out(
            serde_json::to_string(&selection.report()).expect("the device report serialises"),
        );
        return Ok(());
    }
    console::out(format_args!("vendor: {}", selection.platform));
    for device in &selection.devices {
        let spec = device.spec.map_or("no spec row".to_string(), |spec| {
            format!("spec {}", spec.name)
        });
        console::out(format_args!(
            "device {}: {} ({spec}); children get {}",
            device.id,
            device.name,
            device.pin()
        ));
    }
    Ok(())
}
