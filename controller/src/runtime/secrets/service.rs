//! The desktop keyring through the freedesktop Secret Service API (GNOME
//! Keyring, KWallet, KeePassXC): one item per secret, with the attributes
//! `service=steward` and `name=NAME` — what `secret-tool store
//! --label=… service steward name NAME` creates. Values travel over the
//! session bus in an encrypted (DH) session. OAuth credentials are items of
//! their own shelf (`service=steward-oauth`, see [`super::Shelf`]), so they
//! never show up among the user's secrets.
//!
//! [`SecretService::find`] says whether there is one at all: a session bus
//! on which `org.freedesktop.secrets` has an owner or can be activated.
//! Whatever fails after that (a locked collection, a dismissed prompt, a
//! crash of the daemon) is an error, never "not set": the caller must not
//! fall back to another store.

use std::collections::HashMap;

use secret_service::EncryptionType;

use super::{BackendKind, SecretBackend, SecretError, SecretValue, Shelf};

/// The bus name every Secret Service implementation owns.
const BUS_NAME: &str = "org.freedesktop.secrets";
/// A Secret Service found on the session bus, and the shelf (the `service`
/// attribute) its items are on.
#[derive(Debug, Clone)]
pub struct SecretService {
    conn: zbus::Connection,
    shelf: Shelf,
}

fn failing(error: impl std::fmt::Display) -> SecretError {
    SecretError::Unavailable(format!(
        "use the Secret Service (the desktop keyring): {error}"
    ))
}

impl SecretService {
    fn attributes<'a>(&self, name: &'a str) -> HashMap<&'static str, &'a str> {
        HashMap::from([("service", self.shelf.service()), ("name", name)])
    }
}

impl SecretService {
    /// The Secret Service of this session, if there is one: `None` when no
    /// session bus can be reached or nothing owns (or can be activated as)
    /// `org.freedesktop.secrets`.
    pub async fn find(shelf: Shelf) -> Option<SecretService> {
        let conn = zbus::Connection::session().await.ok()?;
        let bus = zbus::fdo::DBusProxy::new(&conn).await.ok()?;
        let name = zbus::names::BusName::try_from(BUS_NAME).ok()?;
        let owned = bus.name_has_owner(name).await.unwrap_or(false);
        let activatable = || async {
            bus.list_activatable_names()
                .await
                .map(|names| names.iter().any(|n| n.as_str() == BUS_NAME))
                .unwrap_or(false)
        };
        if owned || activatable().await {
            Some(SecretService { conn, shelf })
        } else {
            None
        }
    }

    async fn session(&self) -> Result<secret_service::SecretService<'static>, SecretError> {
        secret_service::SecretService::connect_with_existing(EncryptionType::Dh, self.conn.clone())
            .await
            .map_err(failing)
    }
}

#[async_trait::async_trait]
impl SecretBackend for SecretService {
    fn kind(&self) -> BackendKind {
        BackendKind::SecretService
    }

    async fn get(&self, name: &str) -> Result<Option<SecretValue>, SecretError> {
        let ss = self.session().await?;
        let found = ss
            .search_items(self.attributes(name))
            .await
            .map_err(failing)?;
        if let Some(item) = found.unlocked.first() {
            let bytes = item.get_secret().await.map_err(failing)?;
            let value = String::from_utf8(bytes).map_err(|_| {
                SecretError::Unavailable(format!(
                    "read the secret {name}: its value is not UTF-8 text"
                ))
            })?;
            return Ok(Some(SecretValue::new(value)));
        }
        if found.locked.is_empty() {
            Ok(None)
        } else {
            Err(SecretError::Locked)
        }
    }

    async fn set(&self, name: &str, value: &SecretValue) -> Result<(), SecretError> {
        let ss = self.session().await?;
        let collection = ss.get_default_collection().await.map_err(failing)?;
        if collection.is_locked().await.map_err(failing)? {
            return Err(SecretError::Locked);
        }
        let label = self.shelf.label(name);
        collection
            .create_item(
                &label,
                self.attributes(name),
                value.expose().as_bytes(),
                true,
                "text/plain",
            )
            .await
            .map_err(failing)?;
        Ok(())
    }

    async fn remove(&self, name: &str) -> Result<bool, SecretError> {
        let ss = self.session().await?;
        let found = ss
            .search_items(self.attributes(name))
            .await
            .map_err(failing)?;
        if !found.locked.is_empty() {
            return Err(SecretError::Locked);
        }
        for item in &found.unlocked {
            item.delete().await.map_err(failing)?;
        }
        Ok(!found.unlocked.is_empty())
    }

    async fn names(&self) -> Result<Vec<String>, SecretError> {
        let ss = self.session().await?;
        let found = ss
            .search_items(HashMap::from([("service", self.shelf.service())]))
            .await
            .map_err(failing)?;
        let mut names = Vec::new();
        for item in found.unlocked.iter().chain(&found.locked) {
            let attrs = item.get_attributes().await.map_err(failing)?;
            if let Some(name) = attrs.get("name") {
                names.push(name.clone());
            }
        }
        names.sort();
        names.dedup();
        Ok(names)
    }
}
