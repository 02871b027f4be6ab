# The worker's tick (automationworker.TickPath): due automation runs, sweeps of expired records,
# image collection. Every minute, with the scheduler account's OIDC token.
resource "google_cloud_scheduler_job" "tick" {
  name             = "hangar-tick"
  region           = var.region
  schedule         = "* * * * *"
  time_zone        = "Etc/UTC"
  attempt_deadline = "320s"

  retry_config {
    retry_count = 0 # the next tick is a minute away
  }

  http_target {
    http_method = "POST"
    uri         = "${local.worker_url}${local.hangar.tick_path}"
    oidc_token {
      service_account_email = google_service_account.role["scheduler"].email
      audience              = local.worker_url
    }
  }

  depends_on = [google_cloud_run_v2_service_iam_member.worker_invokers]
}
