//! The handheld's BLE end on `bluer` (BlueZ): a GATT peripheral advertising
//! Tandem's service, taking chunks written without response on
//! [`RX_UUID`](super::RX_UUID) and notifying on [`TX_UUID`](super::TX_UUID).
//! One wearable at a time. Untested against radios here (no Bluetooth on
//! the build machines); the framing it rides on is tested against the
//! in-memory GATT double.

use std::io;

use bluer::adv::{Advertisement, AdvertisementHandle};
use bluer::gatt::local::{
    characteristic_control, Application, ApplicationHandle, Characteristic, CharacteristicControl,
    CharacteristicControlEvent, CharacteristicNotify, CharacteristicNotifyMethod, CharacteristicWrite,
    CharacteristicWriteMethod, Service,
};
use bluer::gatt::{CharacteristicReader, CharacteristicWriter};
use futures::StreamExt;
use uuid::Uuid;

use super::{gatt_link, GattPipe, RX_UUID, SERVICE_UUID, TX_UUID};
use crate::link::{Acceptor, BoxFuture, Link};

fn ble_err(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("BLE {what}: {e}"))
}

/// Advertises Tandem's service and accepts one wearable at a time.
pub struct BleAcceptor {
    rx_control: std::pin::Pin<Box<CharacteristicControl>>,
    tx_control: std::pin::Pin<Box<CharacteristicControl>>,
    name: String,
    _app: ApplicationHandle,
    _adv: AdvertisementHandle,
}

impl BleAcceptor {
    /// Powers the default adapter, serves the GATT application and advertises it as `local_name`.
    pub async fn start(local_name: &str) -> io::Result<BleAcceptor> {
        let session =
            bluer::Session::new().await.map_err(|e| ble_err("session (is bluetoothd running?)", e))?;
        let adapter = session.default_adapter().await.map_err(|e| ble_err("adapter", e))?;
        adapter.set_powered(true).await.map_err(|e| ble_err("power on", e))?;
        let (rx_control, rx_handle) = characteristic_control();
        let (tx_control, tx_handle) = characteristic_control();
        let app = Application {
            services: vec![Service {
                uuid: Uuid::from_u128(SERVICE_UUID),
                primary: true,
                characteristics: vec![
                    Characteristic {
                        uuid: Uuid::from_u128(RX_UUID),
                        write: Some(CharacteristicWrite {
                            write_without_response: true,
                            method: CharacteristicWriteMethod::Io,
                            ..Default::default()
                        }),
                        control_handle: rx_handle,
                        ..Default::default()
                    },
                    Characteristic {
                        uuid: Uuid::from_u128(TX_UUID),
                        notify: Some(CharacteristicNotify {
                            notify: true,
                            method: CharacteristicNotifyMethod::Io,
                            ..Default::default()
                        }),
                        control_handle: tx_handle,
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let app = adapter.serve_gatt_application(app).await.map_err(|e| ble_err("GATT application", e))?;
        let adv = adapter
            .advertise(Advertisement {
                service_uuids: [Uuid::from_u128(SERVICE_UUID)].into_iter().collect(),
                discoverable: Some(true),
                local_name: Some(local_name.to_string()),
                ..Default::default()
            })
            .await
            .map_err(|e| ble_err("advertising", e))?;
        Ok(BleAcceptor {
            rx_control: Box::pin(rx_control),
            tx_control: Box::pin(tx_control),
            name: format!("ble {} as '{local_name}'", adapter.name()),
            _app: app,
            _adv: adv,
        })
    }
}

struct PeripheralPipe {
    reader: CharacteristicReader,
    writer: CharacteristicWriter,
}

impl GattPipe for PeripheralPipe {
    fn send_chunk(&mut self, chunk: Vec<u8>) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move { self.writer.send(&chunk).await })
    }

    fn recv_chunk(&mut self) -> BoxFuture<'_, io::Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            match self.reader.recv().await {
                Ok(v) if v.is_empty() => Ok(None),
                Ok(v) => Ok(Some(v)),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(None),
                Err(e) => Err(e),
            }
        })
    }
}

impl Acceptor for BleAcceptor {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<Link>> {
        Box::pin(async move {
            let (mut reader, mut writer) = (None, None);
            while reader.is_none() || writer.is_none() {
                tokio::select! {
                    e = self.rx_control.next() => match e {
                        Some(CharacteristicControlEvent::Write(req)) => {
                            reader = Some(req.accept().map_err(|e| ble_err("accepting writes", e))?);
                        }
                        Some(_) => {}
                        None => return Err(io::Error::new(io::ErrorKind::NotConnected, "the GATT application stopped")),
                    },
                    e = self.tx_control.next() => match e {
                        Some(CharacteristicControlEvent::Notify(n)) => writer = Some(n),
                        Some(_) => {}
                        None => return Err(io::Error::new(io::ErrorKind::NotConnected, "the GATT application stopped")),
                    },
                }
            }
            let (Some(reader), Some(writer)) = (reader, writer) else {
                return Err(io::Error::other("unreachable: both halves are set"));
            };
            let payload = reader.mtu().min(writer.mtu());
            let name = format!("ble {}", reader.device_address());
            Ok(gatt_link(PeripheralPipe { reader, writer }, payload, name))
        })
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}
