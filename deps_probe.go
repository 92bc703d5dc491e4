package main

import (
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/pflag"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/leaderelection"
	_ "k8s.io/client-go/metadata/metadatainformer"
	_ "k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/config/options"
	_ "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/version/verflag"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/klog/v2"
)

func main() {}
