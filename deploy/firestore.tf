resource "google_firestore_database" "main" {
  name                    = "(default)"
  location_id             = local.firestore_location
  type                    = "FIRESTORE_NATIVE"
  delete_protection_state = "DELETE_PROTECTION_ENABLED"
  deletion_policy         = "ABANDON"
  depends_on              = [google_project_service.apis]
}

locals {
  # firestore.indexes.json is the one list of composite indexes: the tests check every query
  # they run against it (internal/fsindex), and this declares each of its entries.
  firestore_indexes = jsondecode(file("${path.module}/../firestore.indexes.json"))
}

resource "google_firestore_index" "composite" {
  for_each = {
    for i in local.firestore_indexes.indexes :
    join(" ", concat([i.collectionGroup, i.queryScope], [for f in i.fields : "${f.fieldPath}:${try(f.order, f.arrayConfig)}"])) => i
  }
  database    = google_firestore_database.main.name
  collection  = each.value.collectionGroup
  query_scope = each.value.queryScope

  dynamic "fields" {
    for_each = each.value.fields
    content {
      field_path   = fields.value.fieldPath
      order        = try(fields.value.order, null)
      array_config = try(fields.value.arrayConfig, null)
    }
  }
}

# The single-field overrides of firestore.indexes.json: fields exempted from indexing.
resource "google_firestore_field" "override" {
  for_each   = { for o in local.firestore_indexes.fieldOverrides : "${o.collectionGroup}.${o.fieldPath}" => o }
  database   = google_firestore_database.main.name
  collection = each.value.collectionGroup
  field      = each.value.fieldPath
  index_config {}
}

# A TTL policy on each expiring collection's time field (store.Expires in the code). The
# field keeps its single-field indexes: the tick's sweep queries it for deployments, or
# documents, the policy has not reached yet.
resource "google_firestore_field" "ttl" {
  for_each   = local.hangar.ttl
  database   = google_firestore_database.main.name
  collection = each.key
  field      = each.value
  ttl_config {}
}
