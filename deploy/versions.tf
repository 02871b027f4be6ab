# Hangar's deployment: everything one Google Cloud project needs, from a project id and a region.
# It applies with Terraform >= 1.6 and OpenTofu >= 1.6 (it uses nothing either lacks). What it
# takes from the code — the functions, the URL map's path rules, Pub/Sub, the TTL fields — is
# in hangar.gen.tf.json, which `go run ./cmd/hangar functions --terraform` writes; the composite
# indexes come from ../firestore.indexes.json. See docs/deploy.md.
terraform {
  required_version = ">= 1.6"
  required_providers {
    google = {
      source = "hashicorp/google"
      # Cloud Run services built from source (build_config) and invoker_iam_disabled.
      version = ">= 6.30, < 8"
    }
    random = {
      source  = "hashicorp/random"
      version = ">= 3.5"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}
