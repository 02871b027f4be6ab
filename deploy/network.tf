# The private network of the hosts, which the functions reach by Direct VPC egress: hosts have
# no public address; their sandboxes reach the internet through Cloud NAT.
resource "google_compute_network" "hangar" {
  name                    = "hangar"
  auto_create_subnetworks = false
  depends_on              = [google_project_service.apis]
}

resource "google_compute_subnetwork" "hangar" {
  name                     = "hangar-${var.region}"
  region                   = var.region
  network                  = google_compute_network.hangar.id
  ip_cidr_range            = var.subnet_cidr
  private_ip_google_access = true
}

resource "google_compute_router" "hangar" {
  name    = "hangar"
  region  = var.region
  network = google_compute_network.hangar.id
}

resource "google_compute_router_nat" "hangar" {
  name                               = "hangar"
  region                             = var.region
  router                             = google_compute_router.hangar.name
  nat_ip_allocate_option             = "AUTO_ONLY"
  source_subnetwork_ip_ranges_to_nat = "ALL_SUBNETWORKS_ALL_IP_RANGES"
}

# The functions (their Direct VPC egress carries the hangar-functions tag) call the hosts' API.
resource "google_compute_firewall" "functions_to_hosts" {
  name        = "hangar-functions-to-hosts"
  network     = google_compute_network.hangar.id
  direction   = "INGRESS"
  source_tags = ["hangar-functions"]
  target_tags = ["hangar-host"]
  allow {
    protocol = "tcp"
    ports    = [tostring(local.host_port)]
  }
}

# Google's health checkers probe the hosts for autohealing.
resource "google_compute_firewall" "health_checks" {
  name          = "hangar-host-health-checks"
  network       = google_compute_network.hangar.id
  direction     = "INGRESS"
  source_ranges = ["35.191.0.0/16", "130.211.0.0/22"]
  target_tags   = ["hangar-host"]
  allow {
    protocol = "tcp"
    ports    = [tostring(local.host_port)]
  }
}

# SSH to the hosts through Identity-Aware Proxy only (gcloud compute ssh --tunnel-through-iap).
resource "google_compute_firewall" "iap_ssh" {
  name          = "hangar-host-iap-ssh"
  network       = google_compute_network.hangar.id
  direction     = "INGRESS"
  source_ranges = ["35.235.240.0/20"]
  target_tags   = ["hangar-host"]
  allow {
    protocol = "tcp"
    ports    = ["22"]
  }
}
