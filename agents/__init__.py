"""placegym.agents: learned placement policies (DOPPLER dual policy, SB3 policies)."""
