# Every topic and subscription pubsub.Provision creates in `hangar dev` (pubsub.Topics and
# pubsub.Subscriptions, through hangar.gen.tf.json), with the same retry and dead-letter
# policies; the worker subscriptions push to the worker function's endpoints with an OIDC
# token of the push service account, which Cloud Run checks before the request arrives.
resource "google_pubsub_topic" "topic" {
  for_each                   = toset(local.hangar.topics)
  name                       = each.value
  message_retention_duration = "604800s"
  depends_on                 = [google_project_service.apis]
}

resource "google_pubsub_subscription" "sub" {
  for_each             = local.hangar.subscriptions
  name                 = each.key
  topic                = google_pubsub_topic.topic[each.value.topic].id
  ack_deadline_seconds = each.value.ack_deadline_seconds
  expiration_policy {
    ttl = "" # never expires for inactivity: a quiet deployment keeps its subscriptions
  }

  dynamic "retry_policy" {
    for_each = each.value.minimum_backoff != "" ? [each.value] : []
    content {
      minimum_backoff = retry_policy.value.minimum_backoff
      maximum_backoff = retry_policy.value.maximum_backoff
    }
  }

  dynamic "dead_letter_policy" {
    for_each = each.value.dead_letter_topic != "" ? [each.value] : []
    content {
      dead_letter_topic     = google_pubsub_topic.topic[dead_letter_policy.value.dead_letter_topic].id
      max_delivery_attempts = dead_letter_policy.value.max_delivery_attempts
    }
  }

  dynamic "push_config" {
    for_each = each.value.push_path != "" ? [each.value] : []
    content {
      push_endpoint = "${local.worker_url}${push_config.value.push_path}"
      oidc_token {
        service_account_email = google_service_account.role["push"].email
        audience              = local.worker_url
      }
    }
  }

  depends_on = [google_service_account_iam_member.pubsub_mints_push_tokens]
}

locals {
  pubsub_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  # The subscriptions with a dead-letter policy, and the topics they park messages on.
  dead_lettering = { for name, s in local.hangar.subscriptions : name => s if s.dead_letter_topic != "" }
}

# Dead-lettering is done by Pub/Sub's service agent: it publishes to the dead-letter topic and
# acknowledges on the source subscription, so it needs both grants (else messages retry forever).
resource "google_pubsub_topic_iam_member" "agent_publishes_dead_letters" {
  for_each = toset([for s in local.dead_lettering : s.dead_letter_topic])
  topic    = google_pubsub_topic.topic[each.value].id
  role     = "roles/pubsub.publisher"
  member   = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "agent_forwards_dead_letters" {
  for_each     = local.dead_lettering
  subscription = google_pubsub_subscription.sub[each.key].id
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}

# Pub/Sub's service agent mints the push service account's OIDC tokens.
resource "google_service_account_iam_member" "pubsub_mints_push_tokens" {
  service_account_id = google_service_account.role["push"].name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent
}
