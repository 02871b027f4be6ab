# The external HTTPS load balancer in front of the public functions. Its URL map is written
# from hangar.gen.tf.json's path rules (composition.Deploy: one rule per service's /rpc/<Service>/*,
# the plain routes /api/v1/sessions/*, /api/v1/webhooks/*, /api/auth/* and the more specific
# /api/auth/oauth/callback), with the dashboard as the default; nothing here lists a path.
locals {
  # The functions behind the load balancer: all but the internal worker.
  lb_functions = { for name, f in local.hangar.functions : name => f if f.public }
}

resource "google_compute_global_address" "lb" {
  name       = "hangar"
  depends_on = [google_project_service.apis]
}

resource "google_compute_region_network_endpoint_group" "function" {
  for_each              = local.lb_functions
  name                  = each.key
  region                = var.region
  network_endpoint_type = "SERVERLESS"
  cloud_run {
    service = google_cloud_run_v2_service.function[each.key].name
  }
}

resource "google_compute_backend_service" "function" {
  for_each              = local.lb_functions
  name                  = each.key
  load_balancing_scheme = "EXTERNAL_MANAGED"
  protocol              = "HTTPS"
  backend {
    group = google_compute_region_network_endpoint_group.function[each.key].id
  }
  log_config {
    enable      = true
    sample_rate = 0.1
  }
}

resource "google_compute_url_map" "hangar" {
  name            = "hangar"
  default_service = google_compute_backend_service.function[local.hangar.default_function].id

  host_rule {
    hosts        = ["*"]
    path_matcher = "api"
  }

  path_matcher {
    name            = "api"
    default_service = google_compute_backend_service.function[local.hangar.default_function].id
    dynamic "path_rule" {
      for_each = local.hangar.path_rules
      content {
        paths   = path_rule.value.paths
        service = google_compute_backend_service.function[path_rule.value.function].id
      }
    }
  }

  # Every path of an app's own origin goes to SessionService (its function tells apps apart
  # by Host).
  dynamic "host_rule" {
    for_each = var.apps_domain != null ? [var.apps_domain] : []
    content {
      hosts        = ["*.${host_rule.value}"]
      path_matcher = "apps"
    }
  }
  dynamic "path_matcher" {
    for_each = var.apps_domain != null ? [var.apps_domain] : []
    content {
      name            = "apps"
      default_service = google_compute_backend_service.function[local.hangar.apps_function].id
    }
  }
}

resource "google_compute_managed_ssl_certificate" "hangar" {
  count = var.domain != null ? 1 : 0
  name  = "hangar"
  managed {
    domains = [var.domain]
  }
}

resource "google_compute_target_https_proxy" "hangar" {
  count            = var.domain != null ? 1 : 0
  name             = "hangar"
  url_map          = google_compute_url_map.hangar.id
  ssl_certificates = [google_compute_managed_ssl_certificate.hangar[0].id]
}

resource "google_compute_global_forwarding_rule" "https" {
  count                 = var.domain != null ? 1 : 0
  name                  = "hangar-https"
  load_balancing_scheme = "EXTERNAL_MANAGED"
  ip_address            = google_compute_global_address.lb.id
  port_range            = "443"
  target                = google_compute_target_https_proxy.hangar[0].id
}

# With a domain, plain HTTP only redirects to HTTPS; without one (a first try), it serves.
resource "google_compute_url_map" "redirect" {
  count = var.domain != null ? 1 : 0
  name  = "hangar-redirect"
  default_url_redirect {
    https_redirect = true
    strip_query    = false
  }
}

resource "google_compute_target_http_proxy" "hangar" {
  name    = "hangar"
  url_map = var.domain != null ? google_compute_url_map.redirect[0].id : google_compute_url_map.hangar.id
}

resource "google_compute_global_forwarding_rule" "http" {
  name                  = "hangar-http"
  load_balancing_scheme = "EXTERNAL_MANAGED"
  ip_address            = google_compute_global_address.lb.id
  port_range            = "80"
  target                = google_compute_target_http_proxy.hangar.id
}
