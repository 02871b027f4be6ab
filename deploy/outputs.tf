output "api_url" {
  description = "HANGAR_URL for clients: the load balancer's origin (every service under /rpc, sign-in under /api/auth)."
  value       = local.public_url
}

output "dashboard_url" {
  description = "The dashboard: the same origin, which the URL map's default route serves."
  value       = "${local.public_url}/"
}

output "bucket" {
  description = "The blob store (HANGAR_BLOB_URL)."
  value       = "gs://${google_storage_bucket.blobs.name}"
}

output "host_group" {
  description = "The sandbox hosts' regional managed instance group."
  value       = google_compute_region_instance_group_manager.hosts.instance_group
}

output "load_balancer_ip" {
  description = "Point the domain's A record here."
  value       = google_compute_global_address.lb.address
}
