# One Cloud Run function per entry of `hangar functions` (composition.Functions, through
# hangar.gen.tf.json), built from the source zip with its entry point as the function target.
#
# Settings, chosen per function (TestDeployMatchesCode checks every function has them):
#   timeout_seconds — Cloud Run's request timeout; streaming services (SessionService: event
#     streams, exec, shells, file streams) hold requests open, so they get the longest, 3600 s.
#   concurrency — requests per instance; the handlers are I/O bound, so many (never 1).
#   cpu, memory — a service that only reads and writes Firestore needs little; sessions proxy
#     streams and the worker runs automation JavaScript, so they get more.
#   min_instances — sign-in (ApiKeyService serves /api/auth) and inbound webhooks answer people
#     and senders who time out, so one instance stays warm; the rest start on demand.
locals {
  function_settings = {
    "hangar-task-service"                 = { timeout_seconds = 300, concurrency = 80, cpu = "1", memory = "512Mi", min_instances = 0, max_instances = 20 }
    "hangar-session-service"              = { timeout_seconds = 3600, concurrency = 250, cpu = "2", memory = "1Gi", min_instances = 0, max_instances = 50 }
    "hangar-profile-service"              = { timeout_seconds = 300, concurrency = 80, cpu = "1", memory = "512Mi", min_instances = 0, max_instances = 10 }
    "hangar-harness-catalog-service"      = { timeout_seconds = 300, concurrency = 80, cpu = "1", memory = "1Gi", min_instances = 0, max_instances = 10 }
    "hangar-model-router-service"         = { timeout_seconds = 300, concurrency = 80, cpu = "1", memory = "512Mi", min_instances = 0, max_instances = 10 }
    "hangar-automation-service"           = { timeout_seconds = 300, concurrency = 40, cpu = "1", memory = "1Gi", min_instances = 0, max_instances = 10 }
    "hangar-automation-run-service"       = { timeout_seconds = 300, concurrency = 80, cpu = "1", memory = "512Mi", min_instances = 0, max_instances = 10 }
    "hangar-oauth-credential-service"     = { timeout_seconds = 300, concurrency = 80, cpu = "1", memory = "512Mi", min_instances = 0, max_instances = 10 }
    "hangar-api-key-service"              = { timeout_seconds = 300, concurrency = 80, cpu = "1", memory = "512Mi", min_instances = 1, max_instances = 10 }
    "hangar-org-secret-service"           = { timeout_seconds = 300, concurrency = 80, cpu = "1", memory = "512Mi", min_instances = 0, max_instances = 10 }
    "hangar-image-service"                = { timeout_seconds = 900, concurrency = 40, cpu = "1", memory = "1Gi", min_instances = 0, max_instances = 10 }
    "hangar-review-service"               = { timeout_seconds = 300, concurrency = 80, cpu = "1", memory = "512Mi", min_instances = 0, max_instances = 10 }
    "hangar-webhook-registration-service" = { timeout_seconds = 300, concurrency = 80, cpu = "1", memory = "512Mi", min_instances = 1, max_instances = 20 }
    # FleetService runs a drain or evacuation in the instance that took the call, for up to
    # 15 minutes: the timeout covers it, and operators are few.
    "hangar-fleet-service" = { timeout_seconds = 900, concurrency = 20, cpu = "1", memory = "512Mi", min_instances = 0, max_instances = 3 }
    # Pushes must be answered within the subscription's ack deadline (60 s), but the tick's
    # sweeps and image collection may run longer.
    "hangar-automation-worker" = { timeout_seconds = 900, concurrency = 40, cpu = "2", memory = "2Gi", min_instances = 0, max_instances = 20 }
    "hangar-dashboard"         = { timeout_seconds = 60, concurrency = 250, cpu = "1", memory = "256Mi", min_instances = 0, max_instances = 5 }
  }

  # Environment by role (composition.OpenFromEnv reads it; docs/configuration.md). The worker
  # composes the same API as the services, so it needs what they need; the dashboard serves
  # static files and reads nothing. Secrets come from Secret Manager (role_secrets).
  api_env = merge(var.extra_env, {
    GOOGLE_CLOUD_PROJECT = var.project_id
    HANGAR_BLOB_URL      = "gs://${google_storage_bucket.blobs.name}"
    HANGAR_PUBLIC_URL    = local.public_url
    HANGAR_DEFAULT_IMAGE = var.default_image
    HANGAR_APPS_DOMAIN   = coalesce(var.apps_domain, "")
  })
  role_env = {
    api       = local.api_env
    worker    = local.api_env
    dashboard = {}
  }
  role_secrets = {
    api       = local.secret_ids
    worker    = local.secret_ids
    dashboard = {}
  }

  worker_url = google_cloud_run_v2_service.function[local.hangar.worker_function].uri
}

resource "google_artifact_registry_repository" "functions" {
  repository_id = "hangar-functions"
  location      = var.region
  format        = "DOCKER"
  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = 5
    }
  }
  depends_on = [google_project_service.apis]
}

resource "google_cloud_run_v2_service" "function" {
  for_each            = local.hangar.functions
  name                = each.key
  location            = var.region
  deletion_protection = false
  # Only the load balancer (and Google's own services) reach a public function; the worker is
  # reached by Pub/Sub push and Cloud Scheduler only.
  ingress = each.value.role == "worker" ? "INGRESS_TRAFFIC_INTERNAL_ONLY" : "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER"
  # Public functions authenticate callers themselves (x-api-key, session cookies); the worker
  # takes only the push and scheduler accounts' OIDC tokens (run.invoker, iam.tf).
  invoker_iam_disabled = each.value.public

  build_config {
    source_location          = "gs://${google_storage_bucket.release.name}/${google_storage_bucket_object.source.name}"
    function_target          = each.value.entry_point
    base_image               = local.go_base_image
    image_uri                = "${var.region}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.functions.repository_id}/${each.key}"
    enable_automatic_updates = true
    service_account          = google_service_account.role["build"].id
  }

  template {
    service_account                  = google_service_account.role[local.function_account[each.value.role]].email
    timeout                          = "${local.function_settings[each.key].timeout_seconds}s"
    max_instance_request_concurrency = local.function_settings[each.key].concurrency

    scaling {
      min_instance_count = local.function_settings[each.key].min_instances
      max_instance_count = local.function_settings[each.key].max_instances
    }

    # Direct VPC egress to the hosts' private addresses; everything else leaves directly.
    dynamic "vpc_access" {
      for_each = each.value.role == "dashboard" ? [] : [1]
      content {
        egress = "PRIVATE_RANGES_ONLY"
        network_interfaces {
          network    = google_compute_network.hangar.id
          subnetwork = google_compute_subnetwork.hangar.id
          tags       = ["hangar-functions"]
        }
      }
    }

    containers {
      # The build replaces this image with the function's; Cloud Run needs one to create the service.
      image          = "us-docker.pkg.dev/cloudrun/container/hello"
      base_image_uri = local.go_base_image
      resources {
        limits = {
          cpu    = local.function_settings[each.key].cpu
          memory = local.function_settings[each.key].memory
        }
        cpu_idle = true
      }

      dynamic "env" {
        for_each = local.role_env[each.value.role]
        content {
          name  = env.key
          value = env.value
        }
      }
      dynamic "env" {
        for_each = local.role_secrets[each.value.role]
        content {
          name = env.key
          value_source {
            secret_key_ref {
              secret  = google_secret_manager_secret.secret[env.key].secret_id
              version = "latest"
            }
          }
        }
      }
    }
  }

  lifecycle {
    ignore_changes = [template[0].containers[0].image, client, client_version]
  }

  depends_on = [
    google_secret_manager_secret_iam_member.access,
    google_project_iam_member.build,
    google_storage_bucket_iam_member.build_reads_source,
  ]
}
