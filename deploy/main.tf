locals {
  firestore_location = coalesce(var.firestore_location, var.region)
  go_base_image      = coalesce(var.go_base_image, "${var.region}-docker.pkg.dev/serverless-runtimes/google-24-full/runtimes/go126")
  public_url         = var.domain != null ? "https://${var.domain}" : "http://${google_compute_global_address.lb.address}"
  # The port every host serves its API on (hangar host --addr).
  host_port = 7070
}

resource "google_project_service" "apis" {
  for_each = toset([
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudscheduler.googleapis.com",
    "compute.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
  ])
  service            = each.value
  disable_on_destroy = false
}

data "google_project" "this" {
  project_id = var.project_id
}
