//! The firmware a disk of the user's boots under (`disk.firmware`): OVMF's UEFI from the host's `ovmf` package, or
//! QEMU's own SeaBIOS, told to print on the serial console.
use crate::error::{Error, Result};
use crate::settings::Settings;
use std::path::Path;

/// The firmware a disk of the user's boots under: the AMI's boot mode (`describe-images`' `BootMode`), or the one
/// a Packer qemu build was made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Firmware {
    /// UEFI (OVMF): a loader on the disk's EFI system partition (`uefi` and `uefi-preferred` AMIs; AL2023's).
    #[default]
    Uefi,
    /// A PC BIOS (SeaBIOS): boot code in the disk's MBR (`legacy-bios` AMIs; Packer's qemu builder's default).
    Bios,
}

impl Firmware {
    pub fn name(self) -> &'static str {
        match self {
            Firmware::Uefi => "UEFI",
            Firmware::Bios => "BIOS",
        }
    }
}

/// SeaBIOS prints on the VGA screen and a debug port, neither of which a VM node has: its `etc/sercon-port`
/// setting (the port, as a little-endian integer: COM1's 0x3f8) puts its text on the serial console, where its
/// "No bootable device" is read like OVMF's shell. The file is the harness's, in the VM cache.
pub fn sercon_file(settings: &Settings) -> Result<std::path::PathBuf> {
    let dir = super::kernel::cache(settings);
    let path = dir.join("seabios-sercon-port");
    if std::fs::read(&path).ok().as_deref() != Some(&SERCON_PORT[..]) {
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        std::fs::write(&path, SERCON_PORT).map_err(|e| Error::io(&path, e))?;
    }
    Ok(path)
}

/// COM1 (0x3f8), little-endian, as SeaBIOS reads an integer from a firmware file.
const SERCON_PORT: [u8; 2] = [0xf8, 0x03];

/// Where Debian's and Ubuntu's `ovmf` package puts the firmware and its empty variable store.
const OVMF: &[(&str, &str)] = &[
    ("/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"),
    ("/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"),
];

/// The UEFI firmware (its code, its empty variable store), from the host's `ovmf` package.
pub fn ovmf() -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    OVMF.iter()
        .find(|(code, vars)| Path::new(code).is_file() && Path::new(vars).is_file())
        .map(|(code, vars)| (code.into(), vars.into()))
        .ok_or_else(|| {
            Error::Vm(format!(
                "no UEFI firmware: none of {} (the Debian package ovmf)",
                OVMF.iter().map(|(c, _)| *c).collect::<Vec<_>>().join(", ")
            ))
        })
}
