# One service account per role, each granted only what that role does:
#   functions — the public API services: Firestore, publishing work, the blob store, the secrets
#   worker    — the automation worker: the same (it composes the same API and publishes run steps)
#   dashboard — static files only: nothing
#   hosts     — the sandbox hosts: Firestore, the blob store, the secrets, their release binaries, logs
#   scheduler — Cloud Scheduler's tick: invoking the worker
#   push      — Pub/Sub's push requests: invoking the worker
#   build     — building the functions from source: reading the source, writing their images, logs
resource "google_service_account" "role" {
  for_each     = toset(["functions", "worker", "dashboard", "hosts", "scheduler", "push", "build"])
  account_id   = "hangar-${each.value}"
  display_name = "Hangar ${each.value}"
  depends_on   = [google_project_service.apis]
}

locals {
  # The service account of each function role (hangar.gen.tf.json's role).
  function_account = {
    api       = "functions"
    worker    = "worker"
    dashboard = "dashboard"
  }
  # The roles that read and write Hangar's records, blobs and secrets.
  data_roles = toset(["functions", "worker", "hosts"])
}

# Firestore has no finer grant than the database: datastore.user reads and writes documents
# and nothing else (no index or database administration).
resource "google_project_iam_member" "firestore" {
  for_each = local.data_roles
  project  = var.project_id
  role     = "roles/datastore.user"
  member   = google_service_account.role[each.value].member
}

resource "google_storage_bucket_iam_member" "blobs" {
  for_each = local.data_roles
  bucket   = google_storage_bucket.blobs.name
  role     = "roles/storage.objectUser"
  member   = google_service_account.role[each.value].member
}

resource "google_secret_manager_secret_iam_member" "access" {
  for_each = {
    for pair in setproduct(tolist(local.data_roles), keys(local.secret_ids)) : "${pair[0]}/${pair[1]}" => { role = pair[0], secret = pair[1] }
  }
  secret_id = google_secret_manager_secret.secret[each.value.secret].id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.role[each.value.role].member
}

# The API publishes webhook deliveries and image jobs, the worker run steps: publishing to
# Hangar's own topics, never subscribing (Pub/Sub pushes).
resource "google_pubsub_topic_iam_member" "publish" {
  for_each = {
    for pair in setproduct(["functions", "worker"], [for t in local.hangar.topics : t if !endswith(t, "-dead")]) : "${pair[0]}/${pair[1]}" => { role = pair[0], topic = pair[1] }
  }
  topic  = google_pubsub_topic.topic[each.value.topic].id
  role   = "roles/pubsub.publisher"
  member = google_service_account.role[each.value.role].member
}

resource "google_storage_bucket_iam_member" "hosts_read_releases" {
  bucket = google_storage_bucket.release.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.role["hosts"].member
}

resource "google_project_iam_member" "hosts_observability" {
  for_each = toset(["roles/logging.logWriter", "roles/monitoring.metricWriter"])
  project  = var.project_id
  role     = each.value
  member   = google_service_account.role["hosts"].member
}

resource "google_cloud_run_v2_service_iam_member" "worker_invokers" {
  for_each = toset(["scheduler", "push"])
  name     = google_cloud_run_v2_service.function[local.hangar.worker_function].name
  location = var.region
  role     = "roles/run.invoker"
  member   = google_service_account.role[each.value].member
}

resource "google_project_iam_member" "build" {
  for_each = toset(["roles/logging.logWriter", "roles/artifactregistry.writer"])
  project  = var.project_id
  role     = each.value
  member   = google_service_account.role["build"].member
}

resource "google_storage_bucket_iam_member" "build_reads_source" {
  bucket = google_storage_bucket.release.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.role["build"].member
}

# Deploying a function runs as the build and runtime accounts: the deployer (Terraform's
# credentials) needs iam.serviceAccountUser on them, which a project owner has.
