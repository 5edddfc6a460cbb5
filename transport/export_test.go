package transport

// MountedRoutes lists what the server's handler serves: each mux pattern
// and the methods it answers (nil for the catch-all "/", which answers
// the dashboard's paths and the API's 404).
func (s *Server) MountedRoutes() map[string][]string { return s.mux.routes }
