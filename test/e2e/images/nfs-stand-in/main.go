/*
Copyright The NDSL controller-manager Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command nfs-stand-in is the e2e suite's stand-in for the NFS CSI driver
// (nfs.csi.k8s.io) on a kind cluster, which has no NFS server: a CSI node
// plugin that publishes a volume as a bind mount of a node-local directory,
// <root>/<server>/<share>/<subDir> from the volume's attributes. Pods of a
// Pipeline step then run on their node with the claimed volume mounted; the
// data is node-local, unlike NFS.
//
// It registers itself with the kubelet (plugin registration socket) and
// serves the CSI Identity and Node services; the CSIDriver object says that
// no attach is needed, so no controller service exists.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func main() {
	driver := flag.String("driver", "nfs.csi.k8s.io", "CSI driver name to serve")
	node := flag.String("node", os.Getenv("NODE_NAME"), "this node's name")
	root := flag.String("root", "/var/lib/ndsl-e2e-nfs", "directory holding the volumes' data on the node")
	kubeletDir := flag.String("kubelet-dir", "/var/lib/kubelet", "the kubelet's root directory")
	flag.Parse()
	if *node == "" {
		log.Fatal("--node or $NODE_NAME is required")
	}

	endpoint := filepath.Join(*kubeletDir, "plugins", *driver, "csi.sock")
	csiServer := grpc.NewServer()
	csi.RegisterIdentityServer(csiServer, &identity{driver: *driver})
	csi.RegisterNodeServer(csiServer, &nodeServer{node: *node, root: *root})
	regServer := grpc.NewServer()
	registerapi.RegisterRegistrationServer(regServer, &registration{driver: *driver, endpoint: endpoint})

	errs := make(chan error, 2)
	go func() { errs <- serve(csiServer, endpoint) }()
	go func() {
		errs <- serve(regServer, filepath.Join(*kubeletDir, "plugins_registry", *driver+"-reg.sock"))
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-errs:
		log.Fatal(err)
	case <-sig:
		regServer.Stop()
		csiServer.Stop()
	}
}

// serve listens on a fresh unix socket at path.
func serve(s *grpc.Server, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	log.Printf("serving on %s", path)
	return s.Serve(l)
}

type registration struct {
	registerapi.UnimplementedRegistrationServer
	driver, endpoint string
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.driver, Endpoint: r.endpoint,
		SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	log.Printf("kubelet registration: registered=%v error=%q", s.PluginRegistered, s.Error)
	return &registerapi.RegistrationStatusResponse{}, nil
}

type identity struct {
	csi.UnimplementedIdentityServer
	driver string
}

func (i *identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.driver, VendorVersion: "e2e"}, nil
}

func (i *identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (i *identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

type nodeServer struct {
	csi.UnimplementedNodeServer
	node, root string
}

func (n *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.node}, nil
}

func (n *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

// NodePublishVolume bind-mounts the volume's directory on the target path.
func (n *nodeServer) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if target == "" || req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id and target path are required")
	}
	attrs := req.GetVolumeContext()
	var parts []string
	for _, key := range []string{"server", "share", "subDir"} {
		// Keep each attribute one path element inside root.
		parts = append(parts, strings.ReplaceAll(strings.Trim(attrs[key], "/"), "/", "_"))
	}
	source := filepath.Join(append([]string{n.root}, parts...)...)
	if err := os.MkdirAll(source, 0o777); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if mounted(target) {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	flags := uintptr(syscall.MS_BIND)
	if err := syscall.Mount(source, target, "", flags, ""); err != nil {
		return nil, status.Error(codes.Internal, fmt.Sprintf("bind-mounting %s on %s: %v", source, target, err))
	}
	if req.GetReadonly() {
		if err := syscall.Mount("", target, "", flags|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	log.Printf("published %s: %s on %s", req.GetVolumeId(), source, target)
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target path and removes it.
func (n *nodeServer) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target path is required")
	}
	if mounted(target) {
		if err := syscall.Unmount(target, 0); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	if err := os.Remove(target); err != nil && !os.IsNotExist(err) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	log.Printf("unpublished %s from %s", req.GetVolumeId(), target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// mounted reports whether path is a mount point listed in /proc/self/mountinfo.
func mounted(path string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}
