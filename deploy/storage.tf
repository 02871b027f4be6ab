resource "random_id" "bucket" {
  byte_length = 4
}

# The blob store (HANGAR_BLOB_URL): snapshots, artifacts and harness plugins. Its objects are
# content-addressed chunks and manifests that hosts collect themselves; the lifecycle only
# cleans what nothing collects: incomplete uploads, and noncurrent versions after a week.
resource "google_storage_bucket" "blobs" {
  name                        = "${var.project_id}-hangar-blobs-${random_id.bucket.hex}"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false

  versioning {
    enabled = true
  }
  lifecycle_rule {
    condition {
      days_since_noncurrent_time = 7
    }
    action {
      type = "Delete"
    }
  }
  lifecycle_rule {
    condition {
      age = 2
    }
    action {
      type = "AbortIncompleteMultipartUpload"
    }
  }
  depends_on = [google_project_service.apis]
}

# The release bucket: the functions' source zips and the hosts' binaries, by content hash so
# that a changed build is a new object (and a new revision); old ones go after 30 days.
resource "google_storage_bucket" "release" {
  name                        = "${var.project_id}-hangar-release-${random_id.bucket.hex}"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true

  lifecycle_rule {
    condition {
      age = 30
    }
    action {
      type = "Delete"
    }
  }
  depends_on = [google_project_service.apis]
}

resource "google_storage_bucket_object" "source" {
  name   = "functions/source-${filemd5(var.source_archive)}.zip"
  bucket = google_storage_bucket.release.name
  source = var.source_archive
}

resource "google_storage_bucket_object" "host_binary" {
  for_each = var.host_binaries
  name     = "hosts/${each.key}-${filemd5(each.value)}"
  bucket   = google_storage_bucket.release.name
  source   = each.value
}
