fn main() {
    println!("ibprobe: under construction");
}
