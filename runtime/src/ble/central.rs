//! The wearable's BLE end on `btleplug`: scan for Tandem's service, connect,
//! write chunks without response to [`RX_UUID`](super::RX_UUID) and take
//! notifications from [`TX_UUID`](super::TX_UUID). Untested against radios
//! here (no Bluetooth on the build machines); the framing it rides on is
//! tested against the in-memory GATT double.

use std::io;
use std::pin::Pin;
use std::time::{Duration, Instant};

use btleplug::api::{
    Central, Characteristic, Manager as _, Peripheral as _, ScanFilter, ValueNotification, WriteType,
};
use btleplug::platform::{Manager, Peripheral};
use futures::{Stream, StreamExt};
use uuid::Uuid;

use super::{gatt_link, GattPipe, RX_UUID, SERVICE_UUID, TX_UUID};
use crate::link::{BoxFuture, Link, Transport};

fn ble_err(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("BLE {what}: {e}"))
}

/// Connects to the first peripheral advertising Tandem's service.
#[derive(Clone, Debug)]
pub struct BleTransport {
    /// How long to scan before giving up.
    pub scan_timeout: Duration,
    /// The ATT payload to use (MTU − 3): 244 with LE data length extension,
    /// 20 on the smallest MTU. btleplug does not report the negotiated MTU.
    pub payload: usize,
}

impl Default for BleTransport {
    fn default() -> Self {
        BleTransport { scan_timeout: Duration::from_secs(10), payload: 244 }
    }
}

struct CentralPipe {
    peripheral: Peripheral,
    rx: Characteristic,
    notifications: Pin<Box<dyn Stream<Item = ValueNotification> + Send>>,
}

impl GattPipe for CentralPipe {
    fn send_chunk(&mut self, chunk: Vec<u8>) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            self.peripheral
                .write(&self.rx, &chunk, WriteType::WithoutResponse)
                .await
                .map_err(|e| ble_err("write", e))
        })
    }

    fn recv_chunk(&mut self) -> BoxFuture<'_, io::Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            let tx = Uuid::from_u128(TX_UUID);
            while let Some(n) = self.notifications.next().await {
                if n.uuid == tx {
                    return Ok(Some(n.value));
                }
            }
            Ok(None)
        })
    }
}

async fn find_peripheral(timeout: Duration) -> io::Result<Peripheral> {
    let service = Uuid::from_u128(SERVICE_UUID);
    let manager = Manager::new().await.map_err(|e| ble_err("manager", e))?;
    let adapter = manager
        .adapters()
        .await
        .map_err(|e| ble_err("adapters", e))?
        .into_iter()
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no Bluetooth adapter on this machine"))?;
    adapter.start_scan(ScanFilter { services: vec![service] }).await.map_err(|e| ble_err("scan", e))?;
    let deadline = Instant::now() + timeout;
    let found = 'scan: loop {
        for p in adapter.peripherals().await.map_err(|e| ble_err("peripherals", e))? {
            if let Ok(Some(props)) = p.properties().await {
                if props.services.contains(&service) {
                    break 'scan Some(p);
                }
            }
        }
        if Instant::now() >= deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let _ = adapter.stop_scan().await;
    found.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no peripheral advertised Tandem's service within {timeout:?}"),
        )
    })
}

impl Transport for BleTransport {
    fn connect(&self) -> BoxFuture<'_, io::Result<Link>> {
        Box::pin(async move {
            let peripheral = find_peripheral(self.scan_timeout).await?;
            peripheral.connect().await.map_err(|e| ble_err("connect", e))?;
            peripheral.discover_services().await.map_err(|e| ble_err("service discovery", e))?;
            let chars = peripheral.characteristics();
            let find = |uuid: u128| {
                chars.iter().find(|c| c.uuid == Uuid::from_u128(uuid)).cloned().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("the peripheral lacks characteristic {uuid:032x}"),
                    )
                })
            };
            let (rx, tx) = (find(RX_UUID)?, find(TX_UUID)?);
            peripheral.subscribe(&tx).await.map_err(|e| ble_err("subscribe", e))?;
            let notifications = peripheral.notifications().await.map_err(|e| ble_err("notifications", e))?;
            let name = format!("ble {}", peripheral.address());
            Ok(gatt_link(CentralPipe { peripheral, rx, notifications }, self.payload, name))
        })
    }

    fn describe(&self) -> String {
        "ble (btleplug central)".into()
    }
}
