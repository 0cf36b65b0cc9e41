fn main() {
    println!("ibexporter: under construction");
}
