# The sandbox host fleet: a regional managed instance group of VMs running `hangar host` under
# systemd (host-startup.sh.tftpl). Hosts register in Firestore's hosts collection and heartbeat;
# the group replaces one whose API stops answering. A stopped host checkpoints and evicts its
# sandboxes first (SIGTERM; their sessions resume elsewhere), so the unit and the group give it
# time to.
locals {
  # The host's environment (cmd/hangar host needs these; the secrets are read from Secret
  # Manager at boot, never written to metadata).
  host_env = {
    GOOGLE_CLOUD_PROJECT = var.project_id
    HANGAR_BLOB_URL      = "gs://${google_storage_bucket.blobs.name}"
    HANGAR_DEFAULT_IMAGE = var.default_image
  }
  host_secrets = local.secret_ids
}

resource "google_compute_health_check" "host" {
  name                = "hangar-host"
  check_interval_sec  = 10
  timeout_sec         = 5
  healthy_threshold   = 2
  unhealthy_threshold = 6
  tcp_health_check {
    port = local.host_port
  }
  depends_on = [google_project_service.apis]
}

resource "google_compute_instance_template" "host" {
  name_prefix  = "hangar-host-"
  machine_type = var.host_machine_type
  tags         = ["hangar-host"]

  disk {
    source_image = "debian-cloud/debian-12"
    disk_size_gb = var.host_disk_gb
    disk_type    = "pd-ssd"
    boot         = true
    auto_delete  = true
  }

  network_interface {
    subnetwork = google_compute_subnetwork.hangar.id
    # No access_config: no public address; egress goes through Cloud NAT.
  }

  service_account {
    email  = google_service_account.role["hosts"].email
    scopes = ["cloud-platform"]
  }

  shielded_instance_config {
    enable_secure_boot          = true
    enable_vtpm                 = true
    enable_integrity_monitoring = true
  }

  metadata = {
    enable-oslogin = "TRUE"
    startup-script = templatefile("${path.module}/host-startup.sh.tftpl", {
      env            = local.host_env
      secrets        = local.host_secrets
      port           = local.host_port
      hangar_url     = "gs://${google_storage_bucket.release.name}/${google_storage_bucket_object.host_binary["hangar"].name}"
      supervisor_url = "gs://${google_storage_bucket.release.name}/${google_storage_bucket_object.host_binary["supervisor"].name}"
    })
  }

  lifecycle {
    create_before_destroy = true
  }
}

resource "google_compute_region_instance_group_manager" "hosts" {
  name               = "hangar-hosts"
  region             = var.region
  base_instance_name = "hangar-host"
  target_size        = var.host_count

  version {
    instance_template = google_compute_instance_template.host.id
  }

  named_port {
    name = "host-api"
    port = local.host_port
  }

  auto_healing_policies {
    health_check = google_compute_health_check.host.id
    # Boot, packages, binaries and the first warm sandbox come before the API listens.
    initial_delay_sec = 300
  }

  update_policy {
    type                  = "PROACTIVE"
    minimal_action        = "REPLACE"
    max_surge_fixed       = 3
    max_unavailable_fixed = 0
  }

  depends_on = [
    google_secret_manager_secret_iam_member.access,
    google_storage_bucket_iam_member.hosts_read_releases,
    google_compute_router_nat.hangar,
  ]
}
