package host

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The kubelet's files, as kubeadm writes and expects them.
const (
	kubeletConf          = "/etc/kubernetes/kubelet.conf"
	bootstrapKubeletConf = "/etc/kubernetes/bootstrap-kubelet.conf"
	kubeadmFlagsEnv      = "/var/lib/kubelet/kubeadm-flags.env"
	kubeletPKI           = "/var/lib/kubelet/pki"
	manifestsDir         = "/etc/kubernetes/manifests"
)

// kubelet does what kubeadm relies on a kubelet for, without a container
// runtime: it answers /healthz, runs the static pods kubeadm writes as
// processes (the commands of their manifests, with this machine's binaries of
// the same version), performs the TLS bootstrap with a real CSR, registers
// the Node with its provider ID and keeps it alive.
type kubelet struct {
	m          *machine
	providerID string
	address    string
}

func (k *kubelet) run(ctx context.Context) {
	go k.serveHealthz()
	go k.runStaticPods(ctx)
	for {
		err := k.runNode(ctx)
		if ctx.Err() != nil {
			return
		}
		k.m.log.Printf("kubelet: %v; retrying", err)
		time.Sleep(2 * time.Second)
	}
}

func (k *kubelet) serveHealthz() {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := &http.Server{Addr: "127.0.0.1:10248", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		k.m.log.Printf("kubelet: healthz: %v", err)
	}
}

// staticPod is one running manifest.
type staticPod struct {
	hash   [32]byte
	cancel context.CancelFunc
	done   chan struct{}
}

// manifest is one static pod manifest as the kubelet last read it.
type manifest struct {
	file string
	hash [32]byte
	pod  corev1.Pod
	// ok is false for a file that is not a pod with a container.
	ok bool
}

// readManifests reads the static pod manifests kubeadm wrote.
func readManifests() []manifest {
	entries, _ := os.ReadDir(manifestsDir)
	var out []manifest
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(manifestsDir, e.Name()))
		if err != nil {
			continue
		}
		m := manifest{file: e.Name(), hash: sha256.Sum256(b)}
		m.ok = yaml.Unmarshal(b, &m.pod) == nil && m.pod.Name != "" && len(m.pod.Spec.Containers) > 0
		out = append(out, m)
	}
	return out
}

func (k *kubelet) runStaticPods(ctx context.Context) {
	pods := map[string]*staticPod{}
	for {
		seen := map[string]bool{}
		for _, m := range readManifests() {
			seen[m.file] = true
			if p := pods[m.file]; p != nil {
				if p.hash == m.hash {
					continue
				}
				p.cancel()
				<-p.done
			}
			if !m.ok {
				k.m.log.Printf("kubelet: static pod %s: not a pod manifest", m.file)
				pods[m.file] = &staticPod{hash: m.hash, cancel: func() {}, done: closed()}
				continue
			}
			pctx, cancel := context.WithCancel(ctx)
			p := &staticPod{hash: m.hash, cancel: cancel, done: make(chan struct{})}
			pods[m.file] = p
			go k.runContainer(pctx, m.pod.Name, m.pod.Spec.Containers[0], p.done)
		}
		for name, p := range pods {
			if !seen[name] {
				p.cancel()
				<-p.done
				delete(pods, name)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// runContainer runs a container's command as a process and restarts it when
// it exits, as the kubelet restarts static pods.
func (k *kubelet) runContainer(ctx context.Context, pod string, c corev1.Container, done chan struct{}) {
	defer close(done)
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 {
		k.m.log.Printf("kubelet: static pod %s has no command", pod)
		return
	}
	logFile, err := k.m.logFile(pod + ".log")
	if err != nil {
		k.m.log.Printf("kubelet: static pod %s: %v", pod, err)
		return
	}
	defer logFile.Close()
	env := os.Environ()
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	for restarts := 0; ; restarts++ {
		k.m.log.Printf("kubelet: starting static pod %s (%s)", pod, argv[0])
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			k.m.log.Printf("kubelet: static pod %s: %v", pod, err)
		} else {
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case <-ctx.Done():
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					<-exited
				}
				return
			case err := <-exited:
				k.m.log.Printf("kubelet: static pod %s exited: %v", pod, err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(restarts+1)*time.Second, 10*time.Second)):
		}
	}
}

// kubeletFlags are the flags kubeadm passes to the kubelet.
type kubeletFlags map[string]string

func readKubeletFlags() (kubeletFlags, error) {
	b, err := os.ReadFile(kubeadmFlagsEnv)
	if err != nil {
		return nil, err
	}
	flags := kubeletFlags{}
	for _, line := range strings.Split(string(b), "\n") {
		_, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(strings.Trim(value, `"`)) {
			name, v, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
			flags[name] = v
		}
	}
	return flags, nil
}

// runNode waits for kubeadm to configure the kubelet, gets a client
// credential (TLS bootstrap when kubeadm left a bootstrap kubeconfig),
// registers the Node and keeps it alive until ctx ends.
func (k *kubelet) runNode(ctx context.Context) error {
	var flags kubeletFlags
	for {
		f, err := readKubeletFlags()
		_, confErr := os.Stat(kubeletConf)
		_, bootErr := os.Stat(bootstrapKubeletConf)
		if err == nil && (confErr == nil || bootErr == nil) {
			flags = f
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	nodeName := flags["hostname-override"]
	if nodeName == "" {
		h, _ := os.Hostname()
		nodeName = strings.ToLower(h)
	}
	cfg, err := k.credentials(ctx, nodeName)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	providerID := k.providerID
	if id := flags["provider-id"]; id != "" {
		providerID = id
	}
	version := "unknown"
	if v, err := client.Discovery().ServerVersion(); err == nil {
		version = v.GitVersion // the kubelet's version is the control plane's here
	}
	if err := k.register(ctx, client, nodeName, providerID, version, flags); err != nil {
		return err
	}
	k.m.log.Printf("kubelet: node %s registered (providerID %s)", nodeName, providerID)
	lastBeat := time.Now()
	mirrors := map[string]string{}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
		k.finishDeletedPods(ctx, client, nodeName)
		k.syncMirrorPods(ctx, client, nodeName, mirrors)
		if time.Since(lastBeat) >= 10*time.Second {
			lastBeat = time.Now()
			if err := k.heartbeat(ctx, client, nodeName, version); err != nil {
				k.m.log.Printf("kubelet: heartbeat: %v", err)
			}
		}
	}
}

// syncMirrorPods keeps a mirror pod in the API for each static pod, as a
// kubelet does: kubeadm finds the etcd members' client URLs in the etcd
// mirror pods' annotations when a control plane joins. mirrors maps each
// mirror pod's name to the manifest hash it was made from.
func (k *kubelet) syncMirrorPods(ctx context.Context, client kubernetes.Interface, nodeName string, mirrors map[string]string) {
	var owner []metav1.OwnerReference
	for _, m := range readManifests() {
		if !m.ok {
			continue
		}
		pod := m.pod
		hash := fmt.Sprintf("%x", m.hash[:8])
		name := pod.Name + "-" + nodeName
		if mirrors[name] == hash {
			continue
		}
		if owner == nil {
			// The node authorizer admits mirror pods owned by their node only.
			node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return
			}
			owner = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: node.UID, Controller: ptr.To(true)}}
		}
		ns := pod.Namespace
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		pods := client.CoreV1().Pods(ns)
		_ = pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		mirror := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: pod.Labels, Annotations: map[string]string{}, OwnerReferences: owner},
			Spec:       pod.Spec,
		}
		maps.Copy(mirror.Annotations, pod.Annotations)
		mirror.Annotations["kubernetes.io/config.mirror"] = hash
		mirror.Annotations["kubernetes.io/config.hash"] = hash
		mirror.Annotations["kubernetes.io/config.source"] = "file"
		mirror.Spec.NodeName = nodeName
		created, err := pods.Create(ctx, mirror, metav1.CreateOptions{})
		if err != nil {
			k.m.log.Printf("kubelet: mirror pod %s: %v", name, err)
			continue
		}
		mirrors[name] = hash
		now := metav1.Now()
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, HostIP: k.address, PodIP: k.address, StartTime: &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
		_, _ = pods.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	}
}

// finishDeletedPods completes the deletion of pods bound to this node, as a
// kubelet does once their containers stopped: the pods the scheduler put
// here never ran (there is no container runtime), so a drain finds nothing to
// wait for.
func (k *kubelet) finishDeletedPods(ctx context.Context, client kubernetes.Interface, nodeName string) {
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			_ = client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	}
}

// credentials returns the kubelet's client configuration, performing the
// TLS bootstrap first when only the bootstrap kubeconfig exists.
func (k *kubelet) credentials(ctx context.Context, nodeName string) (*rest.Config, error) {
	current := filepath.Join(kubeletPKI, "kubelet-client-current.pem")
	if cfg, err := clientcmd.BuildConfigFromFlags("", kubeletConf); err == nil {
		// kubeadm init writes an embedded client certificate; a kubelet
		// stores it where kubeadm's kubelet-finalize phase looks for it.
		if len(cfg.CertData) > 0 && len(cfg.KeyData) > 0 {
			if err := writeFile(current, append(append([]byte{}, cfg.CertData...), cfg.KeyData...), 0o600); err != nil {
				return nil, err
			}
		}
		return cfg, nil
	}
	boot, err := clientcmd.LoadFromFile(bootstrapKubeletConf)
	if err != nil {
		return nil, fmt.Errorf("no usable kubelet kubeconfig: %w", err)
	}
	bootCfg, err := clientcmd.NewDefaultClientConfig(*boot, nil).ClientConfig()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(bootCfg)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	csrPEM, err := certutil.MakeCSR(key, &pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}, nil, nil)
	if err != nil {
		return nil, err
	}
	k.m.log.Printf("kubelet: TLS bootstrap: requesting a client certificate for system:node:%s", nodeName)
	reqName, reqUID, err := csr.RequestCertificate(client, csrPEM, "", certificatesv1.KubeAPIServerClientKubeletSignerName, nil,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, key)
	if err != nil {
		return nil, fmt.Errorf("TLS bootstrap: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(wctx, client, reqName, reqUID)
	if err != nil {
		return nil, fmt.Errorf("TLS bootstrap: waiting for CSR %s: %w", reqName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	pair := append(append([]byte{}, certPEM...), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	if err := writeFile(current, pair, 0o600); err != nil {
		return nil, err
	}
	ctxName := boot.CurrentContext
	cluster := boot.Clusters[boot.Contexts[ctxName].Cluster]
	conf := clientcmdapi.NewConfig()
	conf.Clusters["default-cluster"] = cluster
	conf.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificate: current, ClientKey: current}
	conf.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth"}
	conf.CurrentContext = "default-context"
	if err := clientcmd.WriteToFile(*conf, kubeletConf); err != nil {
		return nil, err
	}
	k.m.log.Printf("kubelet: TLS bootstrap: CSR %s signed", reqName)
	return clientcmd.BuildConfigFromFlags("", kubeletConf)
}

func (k *kubelet) register(ctx context.Context, client kubernetes.Interface, name, providerID, version string, flags kubeletFlags) error {
	labels := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: runtime.GOARCH,
	}
	for _, l := range strings.Split(flags["node-labels"], ",") {
		if key, value, ok := strings.Cut(l, "="); ok {
			labels[key] = value
		}
	}
	var taints []corev1.Taint
	for _, t := range strings.Split(flags["register-with-taints"], ",") {
		kv, effect, ok := strings.Cut(t, ":")
		if !ok {
			continue
		}
		key, value, _ := strings.Cut(kv, "=")
		taints = append(taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: providerID, Taints: taints},
	}
	// The API server may still be starting (the init machine's own).
	deadline := time.Now().Add(10 * time.Minute)
	for {
		_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("registering node %s: %w", name, err)
		}
		time.Sleep(time.Second)
	}
	return k.heartbeat(ctx, client, name, version)
}

// setNodeCondition sets a condition, keeping its transition time while its
// status stays.
func setNodeCondition(status *corev1.NodeStatus, c corev1.NodeCondition, now metav1.Time) {
	c.LastHeartbeatTime, c.LastTransitionTime = now, now
	for i, old := range status.Conditions {
		if old.Type == c.Type {
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			status.Conditions[i] = c
			return
		}
	}
	status.Conditions = append(status.Conditions, c)
}

// heartbeat renews the node's lease and reports it Ready.
func (k *kubelet) heartbeat(ctx context.Context, client kubernetes.Interface, name, version string) error {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: k.address}, {Type: corev1.NodeHostName, Address: name}}
	node.Status.NodeInfo.KubeletVersion = version
	node.Status.NodeInfo.OperatingSystem = "linux"
	node.Status.NodeInfo.Architecture = runtime.GOARCH
	// The conditions a kubelet reports; Cluster API's NodeHealthy reads them all.
	for _, c := range []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "simulated kubelet is posting ready status"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
	} {
		setNodeCondition(&node.Status, c, now)
	}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return err
	}
	leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	micro := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: node.UID}}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &micro},
		}, metav1.CreateOptions{})
	case err == nil:
		lease.Spec.RenewTime = &micro
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil {
		return errors.Join(errors.New("renewing the node lease"), err)
	}
	return nil
}
