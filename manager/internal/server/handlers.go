package server

import (
	"net/http"

	"k8s.io/klog/v2"
)

// answer writes v with 200, or the Backend's error.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) getHost(w http.ResponseWriter, r *http.Request, _ *call) {
	h, err := s.cfg.Backend.Host(r.Context())
	if err == nil && s.cfg.Certificate != nil {
		h.Certificate = s.cfg.Certificate()
	}
	s.answer(w, r, h, err)
}

func (s *Server) preparePool(w http.ResponseWriter, r *http.Request, c *call) {
	p, err := s.cfg.Backend.PreparePool(r.Context(), c.pool)
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	klog.FromContext(r.Context()).V(2).Info("Prepared pool", "pool", c.pool, "path", p.Path, "user", c.user.Name)
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request, c *call) {
	l, err := s.cfg.Backend.ListVolumes(r.Context(), c.pool, c.list)
	s.answer(w, r, l, err)
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request, c *call) {
	v, err := s.cfg.Backend.GetVolume(r.Context(), c.pool, c.name)
	s.answer(w, r, v, err)
}

func (s *Server) createVolume(w http.ResponseWriter, r *http.Request, c *call) {
	req := c.create
	v, created, err := s.cfg.Backend.CreateVolume(r.Context(), c.pool, c.name, req, c.mode, c.remote)
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
		klog.FromContext(r.Context()).Info("Created volume", "pool", c.pool, "volume", c.name, "owner", req.Owner, "path", v.Path, "mode", v.Mode, "reclaimPolicy", v.ReclaimPolicy, "claimNamespace", v.ClaimNamespace, "sizeBytes", v.SizeBytes, "enforcement", v.Enforcement, "multihost", v.Multihost, "user", c.user.Name, "fromNode", c.remote)
	}
	writeJSON(w, code, v)
}

// cloneVolume answers 202 while the copy runs, 201 to the first call that
// sees it done, and 200 once the volume exists.
func (s *Server) cloneVolume(w http.ResponseWriter, r *http.Request, c *call) {
	cl, created, err := s.cfg.Backend.CloneVolume(r.Context(), c.pool, c.name, c.clone, c.mode, c.remote)
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	code := http.StatusAccepted
	switch {
	case cl.Volume != nil && created:
		code = http.StatusCreated
		klog.FromContext(r.Context()).Info("Cloned volume", "pool", c.pool, "volume", c.name, "owner", c.clone.Owner, "source", cl.Source, "method", cl.Method, "seconds", cl.Seconds, "bytes", cl.TotalBytes, "user", c.user.Name, "fromNode", c.remote)
	case cl.Volume != nil:
		code = http.StatusOK
	}
	writeJSON(w, code, cl)
}

func (s *Server) setOwner(w http.ResponseWriter, r *http.Request, c *call) {
	req := c.setOwner
	v, err := s.cfg.Backend.SetOwner(r.Context(), c.pool, c.name, req, c.remote)
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	klog.FromContext(r.Context()).Info("Set volume owner", "pool", c.pool, "volume", c.name, "owner", req.Owner, "previous", req.Previous, "retained", req.Retained, "reclaimPolicy", v.ReclaimPolicy, "claimNamespace", v.ClaimNamespace, "multihost", v.Multihost, "user", c.user.Name, "fromNode", c.remote)
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) setSize(w http.ResponseWriter, r *http.Request, c *call) {
	req := c.setSize
	v, err := s.cfg.Backend.SetSize(r.Context(), c.pool, c.name, req.Owner, req.SizeBytes, c.remote)
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	klog.FromContext(r.Context()).Info("Set volume size", "pool", c.pool, "volume", c.name, "owner", req.Owner, "sizeBytes", v.SizeBytes, "enforcement", v.Enforcement, "user", c.user.Name, "fromNode", c.remote)
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request, c *call) {
	deleted, err := s.cfg.Backend.DeleteVolume(r.Context(), c.pool, c.name, c.del.Owner, c.del.IfEmpty, c.remote)
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	if deleted {
		klog.FromContext(r.Context()).Info("Deleted volume", "pool", c.pool, "volume", c.name, "owner", c.del.Owner, "user", c.user.Name, "fromNode", c.remote)
	}
	w.WriteHeader(http.StatusNoContent)
}
