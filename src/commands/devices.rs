//! `kactors devices`: the GPUs a run with the strategy would use, and what each worker's children
//! get in their environment.

use crate::cli::DevicesArgs;
use crate::config::CliOverrides;
use crate::console;

use super::CommandError;
use super::settings::load_strategy;
use crate::agent::head::placement::{AgentInputs, list_on_allocation};
use crate::placement::{PlacementError, launches_on_slurm};

/// `kactors devices`: what a run with the strategy would use. Only the selection: no GPU is
/// locked, so it answers while a run holds the GPUs.
pub(super) fn devices(args: DevicesArgs) -> Result<(), CommandError> {
    let (request, python) = match &args.strategy {
        Some(name) => {
            let settings =
                load_strategy(&args.config_dir, name, &CliOverrides::default())?.settings;
            let host = crate::devices::HostEnvironment::from_process(settings.python.clone());
            if launches_on_slurm(&settings, &host)? {
                return allocation_devices(&args, name, &settings, &host);
            }
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

/// Under launcher slurm: each node's agent lists its devices, numbered over the nodes as a run
/// numbers them, each named `node:index`. The pins are the agents' own, on their nodes.
fn allocation_devices(
    args: &DevicesArgs,
    strategy: &str,
    settings: &crate::config::RunSettings,
    host: &crate::devices::HostEnvironment,
) -> Result<(), CommandError> {
    if args.gpus.is_some() {
        return Err(CommandError::Usage(
            "--gpus names this machine's devices; under launcher slurm the devices are the allocation's".into(),
        ));
    }
    let inputs = AgentInputs {
        strategy,
        config_dir: args.config_dir.config_dir.as_deref(),
        python: None,
    };
    let hellos = list_on_allocation(settings, &inputs, host).map_err(PlacementError::from)?;
    let (table, _) =
        crate::agent::head::launch::DeviceTable::assign(&hellos.iter().collect::<Vec<_>>(), None);
    let vendor = hellos
        .first()
        .map_or(crate::vendor::Platform::Noop, |hello| {
            crate::vendor::Platform::Vendor(hello.vendor)
        });
    let report = crate::devices::DevicesReport {
        vendor,
        devices: table
            .describe()
            .iter()
            .zip(&table.rows)
            .map(|(row, table_row)| crate::devices::DeviceReport {
                id: row.device.0,
                name: row.name.clone(),
                uuid: row.uuid.clone(),
                spec: table_row.spec.map(|spec| spec.name.clone()),
                node: Some(row.location()),
            })
            .collect(),
        pins: Vec::new(),
    };
    if args.json {
        console::out(serde_json::to_string(&report).expect("the device report serialises"));
        return Ok(());
    }
    console::out(format_args!("vendor: {vendor}"));
    for device in &report.devices {
        console::out(format_args!(
            "device {} on {}: {} ({}); pinned by its node's agent",
            device.id,
            device.node.as_deref().unwrap_or("?"),
            device.name,
            device
                .spec
                .as_ref()
                .map_or("no spec row".to_string(), |spec| format!("spec {spec}")),
        ));
    }
    Ok(())
}
