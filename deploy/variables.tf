variable "project_id" {
  description = "The Google Cloud project Hangar is deployed into."
  type        = string
}

variable "region" {
  description = "The region of the functions, the hosts, the bucket and (by default) Firestore."
  type        = string
}

variable "firestore_location" {
  description = "Firestore's location; null: the region. Changing it replaces the database."
  type        = string
  default     = null
}

variable "domain" {
  description = "The API's and dashboard's domain (HANGAR_PUBLIC_URL is https://<domain>); null: the load balancer's IP address, over plain HTTP only, for a first try."
  type        = string
  default     = null
}

variable "apps_domain" {
  description = "HANGAR_APPS_DOMAIN: sessions' apps are served at <app>.<apps_domain>, routed to SessionService. Null: no apps origins. Its wildcard certificate is the operator's (see docs/deploy.md)."
  type        = string
  default     = null
}

variable "source_archive" {
  description = "Path of the functions' source zip (make deploy builds it: the module with the built plugins and dashboard)."
  type        = string
}

variable "host_binaries" {
  description = "Paths of the linux/amd64 hangar and hangar-supervisor binaries the hosts run (make deploy builds them)."
  type = object({
    hangar     = string
    supervisor = string
  })
}

variable "go_base_image" {
  description = "The Cloud Run functions Go runtime the functions are built on; null: the go126 runtime of the region."
  type        = string
  default     = null
}

variable "default_image" {
  description = "HANGAR_DEFAULT_IMAGE: the image of sessions created without one; \"\": image_uri is required."
  type        = string
  default     = ""
}

variable "seal_keyset" {
  description = "The Tink AEAD keyset (JSON) that seals secrets; null: add the version yourself (gcloud secrets versions add hangar-seal-keyset), which keeps it out of Terraform's state."
  type        = string
  default     = null
  sensitive   = true
}

variable "host_token" {
  description = "The token the functions authenticate to the hosts with; null: add the version yourself (gcloud secrets versions add hangar-host-token)."
  type        = string
  default     = null
  sensitive   = true
}

variable "extra_env" {
  description = "More environment of the API functions and the worker (HANGAR_OIDC_ISSUER, HANGAR_OAUTH_PROVIDERS, HANGAR_AUTOMATION_HTTP_HOSTS, …; docs/configuration.md)."
  type        = map(string)
  default     = {}
}

variable "host_machine_type" {
  description = "The sandbox hosts' machine type."
  type        = string
  default     = "n2-standard-8"
}

variable "host_count" {
  description = "How many sandbox hosts the group keeps."
  type        = number
  default     = 2
}

variable "host_disk_gb" {
  description = "Each host's disk (sandboxes, image layers, snapshot caches), in GB."
  type        = number
  default     = 200
}

variable "subnet_cidr" {
  description = "The range of the subnet the hosts and the functions' Direct VPC egress share."
  type        = string
  default     = "10.40.0.0/20"
}
