//! Named-port turns: the rules that give bus time to ports by name (`tdma`,
//! `token`, `master-slave`, and `lin` for its frames' publishers) keep here
//! which open port has which of their
//! names. A rule refers to a name by its index in the list it was made
//! with; a port opened under a name the rule does not know has no role.

use crate::port_id::PortId;

pub struct Roles {
    /// The names the rule gives turns to, each once.
    names: Vec<String>,
    /// Open ports with one of those names: port and index into `names`.
    ports: Vec<(PortId, usize)>,
}

impl Roles {
    pub fn new(names: Vec<String>) -> Self {
        Self { names, ports: Vec::new() }
    }

    /// The names, in the order the rule gave them.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The port `port` is named `name`: it takes that role, if there is one.
    pub fn name_port(&mut self, port: PortId, name: &str) {
        self.forget_port(port);
        if let Some(role) = self.names.iter().position(|n| n == name) {
            self.ports.push((port, role));
        }
    }

    /// The port `port` left: it has no role any more.
    pub fn forget_port(&mut self, port: PortId) {
        self.ports.retain(|(p, _)| *p != port);
    }

    /// The role of `port`: the index of its name.
    pub fn of(&self, port: PortId) -> Option<usize> {
        self.ports.iter().find(|(p, _)| *p == port).map(|&(_, role)| role)
    }

    /// The names joined for a message: "a, b, c".
    pub fn listed(&self) -> String {
        self.names.join(", ")
    }
}
