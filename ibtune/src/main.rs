fn main() {
    println!("ibtune: under construction");
}
