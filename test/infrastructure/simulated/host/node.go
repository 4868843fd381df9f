/*
Copyright The cabpk-formats Authors.

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

package host

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// What a host's machine image holds to be a Kubernetes node, as an image
// built for Cluster API's kubeadm bootstrap (image-builder's, a Flatcar
// sysext) would: containerd with runc and the CNI plugins (Debian's
// packages), the kubelet, kubeadm and kubectl in /usr/local/bin, the
// kubelet's unit with kubeadm's drop-in, both enabled, and the sysctls
// kubeadm's preflight checks. Nothing here knows the bootstrap data.

// Paths of the node's image.
const (
	kubeletUnitPath    = "/etc/systemd/system/kubelet.service"
	kubeletDropInPath  = "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"
	containerdConfig   = "/etc/containerd/config.toml"
	containerdRoot     = "/var/lib/containerd"
	cniConfigDir       = "/etc/cni/net.d"
	sysctlConfig       = "/etc/sysctl.d/99-kubernetes.conf"
	kubeletConfigYAML  = "/var/lib/kubelet/config.yaml"
	kubeletDefaults    = "/etc/default/kubelet"
	imageBinDir        = "/usr/local/bin"
	containerdUnitName = "containerd.service"
	kubeletUnitName    = "kubelet.service"
)

// kubeletUnit is the unit the kubelet's package installs: the bare binary,
// restarted every 10 s for as long as it fails (before kubeadm wrote its
// configuration, it always does).
const kubeletUnit = `[Unit]
Description=kubelet: the Kubernetes node agent
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/local/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`

// kubeletDropIn is kubeadm's drop-in: the kubeconfigs and configuration
// kubeadm writes, the flags it computes (kubeadm-flags.env, from
// nodeRegistration.kubeletExtraArgs among others) and the administrator's
// KUBELET_EXTRA_ARGS (/etc/default/kubelet), last so that they win.
const kubeletDropIn = `[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/local/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`

// containerdConfigFor is containerd's configuration: CRI with runc and
// cgroupfs (there is no systemd to delegate to), the CNI plugins of Debian's
// package, kubeadm's pause image, and no negative OOM score adjustments
// (the host may not lower them; runc would fail with "can't get final
// child's PID from pipe").
func containerdConfigFor(pauseImage string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, containerdRoot, pauseImage, cniConfigDir)
}

// nodeSysctls are the image's sysctl.d: forwarding and bridged traffic
// through iptables, which kubeadm's preflight checks and kube-proxy needs.
// Both are per network namespace.
var nodeSysctls = map[string]string{
	"net/ipv4/ip_forward":                 "1",
	"net/bridge/bridge-nf-call-iptables":  "1",
	"net/bridge/bridge-nf-call-ip6tables": "1",
}

// installImage writes the node's image into the host's files and applies
// its sysctls (its commands are installed earlier, by installTools).
func (m *machine) installImage() error {
	var sysctl strings.Builder
	for k, v := range nodeSysctls {
		fmt.Fprintf(&sysctl, "%s = %s\n", strings.ReplaceAll(k, "/", "."), v)
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			return fmt.Errorf("sysctl %s: %w", k, err)
		}
	}
	files := map[string]string{
		kubeletUnitPath:   kubeletUnit,
		kubeletDropInPath: kubeletDropIn,
		containerdConfig:  containerdConfigFor(m.cfg.PauseImage),
		sysctlConfig:      sysctl.String(),
		systemctlPath:     systemctlShim,
		// Name lookups end at the lab's gateway, which answers none:
		// nothing leaves the lab, and nothing waits for a timeout.
		"/etc/resolv.conf": "nameserver " + m.cfg.Gateway + "\n",
		// Every host's kubelet measures the lab machine's one disk as its
		// own, shared with everything else on it: at its defaults it would
		// garbage-collect images (the pause image too) and evict pods
		// whenever that disk passes 85% used, and no host can pull an
		// image again (there is no registry). The administrator's
		// KUBELET_EXTRA_ARGS turn both off for the disk; memory pressure
		// still evicts.
		kubeletDefaults: "KUBELET_EXTRA_ARGS=--image-gc-high-threshold=100 --eviction-hard=memory.available<100Mi,nodefs.available<1%,imagefs.available<1%\n",
	}
	for p, c := range files {
		mode := os.FileMode(0o644)
		if p == systemctlPath {
			mode = 0o755
		}
		if err := writeFile(p, []byte(c), mode); err != nil {
			return err
		}
	}
	return os.MkdirAll(cniConfigDir, 0o755)
}

// copySeed makes dst a copy of the containerd seed: hard links for the
// content and the unpacked snapshots (containerd never writes to either in
// place), real copies of its databases.
func copySeed(seed, dst string) error {
	return filepath.WalkDir(seed, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(seed, p)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
			if err := os.Chmod(target, info.Mode()&fs.ModePerm|info.Mode()&(fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid)); err != nil {
				return err
			}
			return os.Lchown(target, int(st.Uid), int(st.Gid))
		case info.Mode()&fs.ModeSymlink != 0:
			to, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(to, target); err != nil {
				return err
			}
			return os.Lchown(target, int(st.Uid), int(st.Gid))
		case info.Mode().IsRegular() && strings.HasSuffix(p, ".db"):
			return copyFile(p, target, info.Mode())
		case info.Mode().IsRegular():
			if err := os.Link(p, target); err != nil {
				return copyFile(p, target, info.Mode()) // another file system
			}
			return nil
		}
		return fmt.Errorf("containerd seed: %s is neither a file, a directory nor a link", p)
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// criSocket is where containerd serves the CRI.
const criSocket = "/run/containerd/containerd.sock"

// waitForCRI waits until containerd's CRI plugin answers: containerd reports
// itself ready before the plugin finished starting ("server is not
// initialized yet"), which a boot gives it time for before cloud-init's final
// stage runs kubeadm.
func waitForCRI(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+criSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	for {
		_, err := rt.Version(ctx, &runtimeapi.VersionRequest{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd's CRI did not answer within %s: %w", timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// installTools puts the image's commands (this machine's binaries) in
// /usr/local/bin. They are the lower layers of an overlay, so the node sees
// regular files it can replace, as an in-place update replaces kubeadm and
// the kubelet; what it writes stays in the host's memory. Where the tools
// cannot be layers (a file not named as its command), they are bind mounts,
// which the node cannot replace. Either way they are not links: the host
// covers /tmp and /run with its own, and a tools cache that lives there must
// stay reachable.
func (m *machine) installTools() error {
	err := m.layerTools()
	if err == nil {
		return nil
	}
	fmt.Fprintf(os.Stderr, "simulated host: the tools are bind mounts, which updates cannot replace: %v\n", err)
	for name, path := range m.cfg.Tools {
		dst := filepath.Join(imageBinDir, name)
		_ = os.Remove(dst)
		if err := os.WriteFile(dst, nil, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount(path, dst, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("installing %s: %w", name, err)
		}
	}
	return nil
}

// layerTools mounts an overlay on /usr/local/bin whose lower layers are the
// tools' directories, above what the image has there.
func (m *machine) layerTools() error {
	var lower []string
	for name, path := range m.cfg.Tools {
		if filepath.Base(path) != name {
			return fmt.Errorf("%s is %s, not a file of its own name", name, path)
		}
		lower = append(lower, filepath.Dir(path))
	}
	slices.Sort(lower)
	lower = append(slices.Compact(lower), imageBinDir)
	upper, work := filepath.Join(m.cfg.LayersDir, "tools", "upper"), filepath.Join(m.cfg.LayersDir, "tools", "work")
	for _, p := range []string{upper, work} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(lower, ":"), upper, work)
	if err := syscall.Mount("overlay", imageBinDir, "overlay", 0, opts); err != nil {
		return fmt.Errorf("overlay over %s: %w", imageBinDir, err)
	}
	return nil
}
