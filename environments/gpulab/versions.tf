terraform {
  # State lives in .hpcbench/<env>/, outside the source tree: hpcbench deploy
  # passes the path with `init -backend-config=path=...`.
  backend "local" {}
  required_version = ">= 1.6"
  required_providers {
    local = {
      source  = "hashicorp/local"
      version = "2.9.0"
    }
  }
}
