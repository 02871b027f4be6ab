# The secrets the functions and hosts share, by the variable they are read into. Their versions
# are the operator's: pass seal_keyset/host_token to have Terraform add them (they are then in
# its state), or leave them null and add them with `gcloud secrets versions add`
# (docs/deploy.md).
locals {
  secret_ids = {
    HANGAR_SEAL_KEYSET = "hangar-seal-keyset"
    HANGAR_HOST_TOKEN  = "hangar-host-token"
  }
  secret_values = {
    HANGAR_SEAL_KEYSET = var.seal_keyset
    HANGAR_HOST_TOKEN  = var.host_token
  }
}

resource "google_secret_manager_secret" "secret" {
  for_each  = local.secret_ids
  secret_id = each.value
  replication {
    auto {}
  }
  depends_on = [google_project_service.apis]
}

resource "google_secret_manager_secret_version" "operator" {
  # Whether a value was given is no secret; the value stays sensitive.
  for_each    = toset([for k, v in local.secret_values : k if nonsensitive(v != null)])
  secret      = google_secret_manager_secret.secret[each.key].id
  secret_data = local.secret_values[each.key]
}
