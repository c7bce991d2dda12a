terraform {
  # State lives in .hpcbench/<env>/, outside the source tree: hpcbench deploy
  # passes the path with `init -backend-config=path=...`.
  backend "local" {}
  required_version = ">= 1.6"
  required_providers {
    docker = {
      source  = "kreuzwerker/docker"
      version = "4.6.0"
    }
    local = {
      source  = "hashicorp/local"
      version = "2.9.0"
    }
  }
}

# The Docker provider reads DOCKER_HOST like the docker CLI (default: the local socket).
provider "docker" {}
