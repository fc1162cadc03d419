//! The epoch file: `dataDir/keel-epoch` holds the epoch of the last start in decimal.
//! Each start takes the next epoch, so every zxid it hands out ((epoch << 32) | n) is
//! above any zxid of an earlier run. A fresh dataDir starts at epoch 0, like ZooKeeper.

use std::io::Write;
use std::path::Path;

const FILE: &str = "keel-epoch";

/// Reads the last epoch from `data_dir` (none yet = this is the first start), records
/// and returns the epoch this start uses.
///
/// Errors: dataDir cannot be created or written, or the file holds something other
/// than a decimal epoch (a corrupt dataDir is refused, never rewritten).
pub fn next_epoch(data_dir: &Path) -> std::io::Result<u32> {
    std::fs::create_dir_all(data_dir)?;
    let path = data_dir.join(FILE);
    let epoch = match std::fs::read_to_string(&path) {
        Ok(text) => {
            let last: u32 = text.trim().parse().map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: not an epoch number: {:?}", path.display(), text.trim()),
                )
            })?;
            last.checked_add(1).ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, "epoch overflow")
            })?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e),
    };
    let tmp = data_dir.join(format!("{FILE}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)?;
        writeln!(f, "{epoch}")?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    Ok(epoch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_increase_and_corruption_is_refused() {
        let dir = std::env::temp_dir().join(format!("keel-epoch-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(next_epoch(&dir).unwrap(), 0);
        assert_eq!(next_epoch(&dir).unwrap(), 1);
        std::fs::write(dir.join(FILE), "garbage").unwrap();
        assert!(next_epoch(&dir).is_err());
        assert_eq!(std::fs::read_to_string(dir.join(FILE)).unwrap(), "garbage");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
